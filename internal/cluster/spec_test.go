package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

func argoSecret(data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "c1",
		Labels: map[string]string{ArgoCDSecretTypeLabel: ArgoCDSecretTypeCluster}}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func TestSpecFromSecret(t *testing.T) {
	const ca = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==" // base64 of a PEM header: enough for a Spec
	awsAllowed, err := NewExecPolicy([]string{"/usr/local/bin/aws"}, 0, "")
	require.NoError(t, err)
	tests := []struct {
		name    string
		secret  *corev1.Secret
		wantErr string
		policy  *ExecPolicy
		check   func(t *testing.T, s Spec)
	}{
		{name: "bearer token and CA", secret: argoSecret(map[string]string{"name": "prod", "server": "https://prod.example:6443",
			"config": `{"bearerToken":"tok","tlsClientConfig":{"insecure":false,"caData":"` + ca + `","serverName":"api.prod"}}`}),
			check: func(t *testing.T, s Spec) {
				assert.Equal(t, "prod", s.Name)
				assert.Equal(t, SourceArgoCD, s.Source)
				assert.Equal(t, "Argo CD Secret argocd/c1", s.Origin)
				assert.Equal(t, "https://prod.example:6443", s.Server())
				assert.Equal(t, "tok", s.Config.BearerToken)
				assert.Equal(t, "-----BEGIN CERTIFICATE-----\n", string(s.Config.CAData))
				assert.Equal(t, "api.prod", s.Config.ServerName)
				assert.False(t, s.Config.Insecure)
				assert.Nil(t, s.Namespaces)
			}},
		{name: "name defaults to the server, insecure, namespaces", secret: argoSecret(map[string]string{"server": "https://10.0.0.1",
			"namespaces": " team-a, team-b ,", "config": `{"username":"u","password":"p","tlsClientConfig":{"insecure":true}}`}),
			check: func(t *testing.T, s Spec) {
				assert.Equal(t, "https://10.0.0.1", s.Name)
				assert.True(t, s.Config.Insecure)
				assert.Equal(t, "u", s.Config.Username)
				assert.Equal(t, []string{"team-a", "team-b"}, s.Namespaces)
			}},
		{name: "exec provider, allowed", policy: awsAllowed, secret: argoSecret(map[string]string{"name": "eks", "server": "https://eks.example",
			"config": `{"execProviderConfig":{"command":"/usr/local/bin/aws","args":["eks","get-token","--cluster-name","x"],"env":{"B":"2","A":"1"},"apiVersion":"client.authentication.k8s.io/v1"},"tlsClientConfig":{"caData":"` + ca + `"}}`}),
			check: func(t *testing.T, s Spec) {
				assert.Nil(t, s.Config.ExecProvider, "client-go never runs it: execCreds does, under a deadline")
				require.NotNil(t, s.creds)
				assert.Equal(t, "/usr/local/bin/aws", s.creds.path)
				assert.Equal(t, []string{"eks", "get-token", "--cluster-name", "x"}, s.creds.args)
				assert.Equal(t, []string{"A=1", "B=2"}, s.creds.env)
				assert.Equal(t, "client.authentication.k8s.io/v1", s.creds.apiVersion)
				assert.NotNil(t, s.Config.WrapTransport)
			}},
		{name: "exec provider, not allowed", secret: argoSecret(map[string]string{"name": "eks", "server": "https://eks.example",
			"config": `{"execProviderConfig":{"command":"aws","args":["eks","get-token"]}}`}), wantErr: `credential plugin not allowed: "aws"`},
		{name: "exec provider, another command than allowed", policy: awsAllowed, secret: argoSecret(map[string]string{"name": "eks", "server": "https://eks.example",
			"config": `{"execProviderConfig":{"command":"aws","args":["eks","get-token"]}}`}), wantErr: `credential plugin not allowed: "aws" (allowed: /usr/local/bin/aws)`},
		{name: "client certificate and proxy", secret: argoSecret(map[string]string{"name": "c", "server": "https://c.example",
			"config": `{"tlsClientConfig":{"certData":"` + ca + `","keyData":"` + ca + `"},"proxyUrl":"http://proxy:3128","disableCompression":true}`}),
			check: func(t *testing.T, s Spec) {
				assert.NotEmpty(t, s.Config.CertData)
				assert.NotNil(t, s.Config.Proxy)
				assert.True(t, s.Config.DisableCompression)
			}},
		{name: "stringData is read too", secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "c1",
			Labels: map[string]string{ArgoCDSecretTypeLabel: ArgoCDSecretTypeCluster}},
			StringData: map[string]string{"name": "sd", "server": "https://sd.example", "config": `{"bearerToken":"x"}`}},
			check: func(t *testing.T, s Spec) { assert.Equal(t, "sd", s.Name) }},
		{name: "missing server", secret: argoSecret(map[string]string{"name": "x"}), wantErr: `"server" is required`},
		{name: "server not a URL", secret: argoSecret(map[string]string{"name": "x", "server": "prod:6443"}), wantErr: "not an http(s) URL"},
		{name: "bad config JSON", secret: argoSecret(map[string]string{"name": "x", "server": "https://x", "config": `{"bearerToken":`}), wantErr: `"config" is not valid`},
		{name: "bad caData", secret: argoSecret(map[string]string{"name": "x", "server": "https://x", "config": `{"tlsClientConfig":{"caData":"%%%"}}`}), wantErr: `"config" is not valid`},
		{name: "aws auth without the plugin allowed", secret: argoSecret(map[string]string{"name": "x", "server": "https://x", "config": `{"awsAuthConfig":{"clusterName":"x"}}`}), wantErr: "argocd-k8s-auth"},
		{name: "exec without command", secret: argoSecret(map[string]string{"name": "x", "server": "https://x", "config": `{"execProviderConfig":{"args":["a"]}}`}), wantErr: "command is required"},
		{name: "cert without key", secret: argoSecret(map[string]string{"name": "x", "server": "https://x", "config": `{"tlsClientConfig":{"certData":"` + ca + `"}}`}), wantErr: "certData and keyData go together"},
		{name: "bad namespace", secret: argoSecret(map[string]string{"name": "x", "server": "https://x", "namespaces": "ok,Not_OK"}), wantErr: `"namespaces"`},
		{name: "name with spaces", secret: argoSecret(map[string]string{"name": "a b", "server": "https://x"}), wantErr: "whitespace"},
		{name: "missing label", secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "c1"}}, wantErr: "missing label"},
		{name: "in-cluster server outside a pod", secret: argoSecret(map[string]string{"name": "in-cluster", "server": ArgoCDInClusterServer}), wantErr: "in-cluster server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := SpecFromSecretAllowing(tt.secret, tt.policy)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Contains(t, err.Error(), "argocd/c1", "the error names the Secret")
				return
			}
			require.NoError(t, err)
			tt.check(t, s)
		})
	}
}

func TestFingerprintIgnoresIrrelevantChanges(t *testing.T) {
	a := argoSecret(map[string]string{"name": "x", "server": "https://x", "config": "{}"})
	b := a.DeepCopy()
	b.Labels["other"] = "label"
	b.Data["project"] = []byte("p")
	assert.Equal(t, fingerprint(a), fingerprint(b))
	b.Data["config"] = []byte(`{"bearerToken":"new"}`)
	assert.NotEqual(t, fingerprint(a), fingerprint(b))
}

func writeKubeconfig(t *testing.T, contexts ...string) string {
	cfg := clientcmdapi.NewConfig()
	for _, n := range contexts {
		cfg.Clusters[n] = &clientcmdapi.Cluster{Server: "https://" + n + ".example:6443"}
		cfg.AuthInfos[n+"-user"] = &clientcmdapi.AuthInfo{Token: n + "-token"}
		cfg.Contexts[n] = &clientcmdapi.Context{Cluster: n, AuthInfo: n + "-user"}
	}
	if len(contexts) > 0 {
		cfg.CurrentContext = contexts[0]
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

func TestKubeconfigSpecs(t *testing.T) {
	path := writeKubeconfig(t, "zeta", "alpha", "mid")
	tests := []struct {
		name     string
		contexts []string
		all      bool
		want     []string
		wantErr  string
	}{
		{name: "listed, in order, deduplicated", contexts: []string{"mid", "zeta", "mid"}, want: []string{"mid", "zeta"}},
		{name: "all contexts sorted", all: true, want: []string{"alpha", "mid", "zeta"}},
		{name: "unknown context", contexts: []string{"alpha", "nope"}, wantErr: `context "nope" not found (contexts: alpha, mid, zeta)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			specs, err := KubeconfigSpecs(path, tt.contexts, tt.all, 0, 0)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			var names []string
			for _, s := range specs {
				names = append(names, s.Name)
				assert.Equal(t, "https://"+s.Name+".example:6443", s.Server())
				assert.Equal(t, s.Name+"-token", s.Config.BearerToken, "each context keeps its own credentials")
				assert.Equal(t, SourceKubeconfig, s.Source)
			}
			assert.Equal(t, tt.want, names)
		})
	}
}

func TestSelect(t *testing.T) {
	specs := []Spec{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	tests := []struct {
		names   []string
		want    []string
		wantErr bool
	}{
		{names: nil, want: []string{"a", "b", "c"}},
		{names: []string{"c", "a", "c"}, want: []string{"c", "a"}},
		{names: []string{"a", "x"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.names), func(t *testing.T) {
			got, err := Select(specs, tt.names)
			if tt.wantErr {
				var fe *core.FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, "cluster", fe.Field)
				assert.ErrorIs(t, err, core.ErrInvalid)
				return
			}
			require.NoError(t, err)
			var names []string
			for _, s := range got {
				names = append(names, s.Name)
			}
			assert.Equal(t, tt.want, names)
		})
	}
}

func TestParallelBoundAndErrors(t *testing.T) {
	tests := []struct {
		name  string
		items int
		limit int
		fail  map[int]bool
	}{
		{name: "bound 2 of 7", items: 7, limit: 2},
		{name: "default bound", items: 9, limit: 0},
		{name: "failures do not stop the others", items: 5, limit: 3, fail: map[int]bool{1: true, 3: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			items := make([]int, tt.items)
			for i := range items {
				items[i] = i
			}
			var cur, peak, calls atomic.Int32
			err := Parallel(context.Background(), items, tt.limit, func(i int) string { return fmt.Sprint("c", i) },
				func(_ context.Context, i int) error {
					calls.Add(1)
					n := cur.Add(1)
					for {
						p := peak.Load()
						if n <= p || peak.CompareAndSwap(p, n) {
							break
						}
					}
					time.Sleep(20 * time.Millisecond)
					cur.Add(-1)
					if tt.fail[i] {
						return errors.New("boom")
					}
					return nil
				})
			limit := tt.limit
			if limit == 0 {
				limit = DefaultParallel
			}
			assert.LessOrEqual(t, int(peak.Load()), limit)
			assert.Equal(t, int32(tt.items), calls.Load())
			if len(tt.fail) == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			for i := range tt.fail {
				assert.Contains(t, err.Error(), fmt.Sprintf("cluster c%d: boom", i))
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	path := writeKubeconfig(t, "a", "b")
	specs, err := KubeconfigSpecs(path, []string{"a", "b"}, false, 0, 0)
	require.NoError(t, err)
	tests := []struct {
		name    string
		opts    Options
		wantErr string
		def     string
	}{
		{name: "no cluster", opts: Options{}, wantErr: "at least one cluster"},
		{name: "duplicate", opts: Options{Clusters: []Spec{specs[0], specs[0]}}, wantErr: "registered twice"},
		{name: "unknown default", opts: Options{Clusters: specs, Default: "c"}, wantErr: `default cluster "c"`},
		{name: "first is the default", opts: Options{Clusters: specs}, def: "a"},
		{name: "explicit default", opts: Options{Clusters: specs, Default: "b"}, def: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(tt.opts)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.def, r.DefaultName())
			a, err := r.Attacher("")
			require.NoError(t, err)
			assert.Equal(t, tt.def, a.Cluster())
			_, err = r.Attacher("nope")
			var fe *core.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, "cluster", fe.Field)
			assert.Contains(t, fe.Msg, "registered: a, b")
		})
	}
}

func TestMain(m *testing.M) { os.Exit(testMain(m)) }
