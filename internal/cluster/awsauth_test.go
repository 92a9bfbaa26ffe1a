package cluster

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// awsSecret is an Argo CD EKS cluster Secret: config.awsAuthConfig set to aws.
func awsSecret(server string, aws any) *corev1.Secret {
	cfg, _ := json.Marshal(map[string]any{"tlsClientConfig": map[string]any{"insecure": true}, "awsAuthConfig": aws})
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "eks", Namespace: "argocd",
		Labels: map[string]string{ArgoCDSecretTypeLabel: ArgoCDSecretTypeCluster}},
		StringData: map[string]string{"name": "eks", "server": server, "config": string(cfg)}}
}

// fakeArgoCDK8sAuth puts an argocd-k8s-auth script first on PATH that writes its
// arguments, one a line, to the returned file and prints an ExecCredential whose token
// is "eks-token".
func fakeArgoCDK8sAuth(t *testing.T) (plugin, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	argsFile = filepath.Join(dir, "args")
	exp := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	plugin = writeScript(t, dir, ArgoCDAWSAuthCommand, `printf '%s\n' "$@" > `+argsFile+`
echo '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"eks-token","expirationTimestamp":"`+exp+`"}}'
`)
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return plugin, argsFile
}

func TestAWSAuthConfigIsArgoCDsCredentialPluginUnderTheExecPolicy(t *testing.T) {
	plugin, _ := fakeArgoCDK8sAuth(t)
	allowed, err := NewExecPolicy([]string{ArgoCDAWSAuthCommand}, 0, "")
	require.NoError(t, err)
	other, err := NewExecPolicy([]string{"sh"}, 0, "")
	require.NoError(t, err)
	exec := map[string]any{"command": ArgoCDAWSAuthCommand}

	tests := []struct {
		name     string
		policy   *ExecPolicy
		aws      any
		extra    map[string]any // more "config" keys
		wantArgs []string
		wantErr  string
		wantIs   error
	}{
		{name: "cluster name only", policy: allowed, aws: map[string]any{"clusterName": "prod"},
			wantArgs: []string{"aws", "--cluster-name", "prod"}},
		{name: "role and profile", policy: allowed,
			aws:      map[string]any{"clusterName": "prod", "roleARN": "arn:aws:iam::123456789012:role/argo", "profile": "hub"},
			wantArgs: []string{"aws", "--cluster-name", "prod", "--role-arn", "arn:aws:iam::123456789012:role/argo", "--profile", "hub"}},
		{name: "not allowed: refused", policy: nil, aws: map[string]any{"clusterName": "prod"}, wantIs: ErrExecNotAllowed, wantErr: `"config".awsAuthConfig`},
		{name: "another plugin allowed: refused", policy: other, aws: map[string]any{"clusterName": "prod"}, wantIs: ErrExecNotAllowed},
		{name: "cluster name missing", policy: allowed, aws: map[string]any{"roleARN": "arn:aws:iam::1:role/r"}, wantErr: "awsAuthConfig.clusterName: is required"},
		{name: "empty object", policy: allowed, aws: map[string]any{}, wantErr: "awsAuthConfig.clusterName: is required"},
		{name: "cluster name is an option", policy: allowed, aws: map[string]any{"clusterName": "--help"}, wantErr: "awsAuthConfig.clusterName: \"--help\" starts with '-'"},
		{name: "role ARN is an option", policy: allowed, aws: map[string]any{"clusterName": "prod", "roleARN": "-x"}, wantErr: "awsAuthConfig.roleARN: \"-x\" starts with '-'"},
		{name: "profile is an option", policy: allowed, aws: map[string]any{"clusterName": "prod", "profile": "--region=x"}, wantErr: "awsAuthConfig.profile:"},
		{name: "cluster name with a space", policy: allowed, aws: map[string]any{"clusterName": "prod --profile x"}, wantErr: "awsAuthConfig.clusterName: \"prod --profile x\" contains whitespace"},
		{name: "role ARN with a newline", policy: allowed, aws: map[string]any{"clusterName": "prod", "roleARN": "arn\nx"}, wantErr: "awsAuthConfig.roleARN:"},
		{name: "profile with a control character", policy: allowed, aws: map[string]any{"clusterName": "prod", "profile": "a\x00b"}, wantErr: "awsAuthConfig.profile:"},
		{name: "profile with a unicode space", policy: allowed, aws: map[string]any{"clusterName": "prod", "profile": "a\u2028b"}, wantErr: "awsAuthConfig.profile:"},
		{name: "cluster name too long", policy: allowed, aws: map[string]any{"clusterName": strings.Repeat("a", maxAWSAuthValue+1)}, wantErr: "at most"},
		{name: "both awsAuthConfig and execProviderConfig", policy: allowed, aws: map[string]any{"clusterName": "prod"},
			extra: map[string]any{"execProviderConfig": exec}, wantErr: "both awsAuthConfig and execProviderConfig"},
		{name: "not an object", policy: allowed, aws: "prod", wantErr: `"config" is not valid`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := awsSecret("https://eks.example", tt.aws)
			if tt.extra != nil {
				var cfg map[string]any
				require.NoError(t, json.Unmarshal([]byte(s.StringData["config"]), &cfg))
				for k, v := range tt.extra {
					cfg[k] = v
				}
				b, _ := json.Marshal(cfg)
				s.StringData["config"] = string(b)
			}
			sp, err := specFromSecret(s, tt.policy)
			if tt.wantErr != "" || tt.wantIs != nil {
				require.Error(t, err)
				if tt.wantIs != nil {
					require.ErrorIs(t, err, tt.wantIs)
				}
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Contains(t, err.Error(), "Argo CD cluster Secret argocd/eks", "the error names the Secret")
				return
			}
			require.NoError(t, err)
			require.NotNil(t, sp.exec)
			assert.Equal(t, plugin, sp.exec.path, "what runs is the allowed argocd-k8s-auth")
			assert.Equal(t, tt.wantArgs, sp.exec.args)
			assert.Empty(t, sp.exec.env, "awsAuthConfig sets no environment")
		})
	}
}

func TestAllowedArgoCDK8sAuthTokenAuthenticatesEKSRequests(t *testing.T) {
	_, argsFile := fakeArgoCDK8sAuth(t)
	policy, err := NewExecPolicy([]string{ArgoCDAWSAuthCommand}, 10*time.Second, "")
	require.NoError(t, err)
	var auth []string
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
	}))
	defer ts.Close()

	sp, err := SpecFromSecretAllowing(awsSecret(ts.URL, map[string]any{"clusterName": "prod", "roleARN": "arn:aws:iam::1:role/argo"}), policy)
	require.NoError(t, err)
	defer sp.closeCredentials()
	rt, err := rest.TransportFor(sp.Config)
	require.NoError(t, err)
	resp, err := (&http.Client{Transport: rt}).Get(ts.URL + "/version")
	require.NoError(t, err)
	resp.Body.Close()

	assert.Equal(t, []string{"Bearer eks-token"}, auth)
	got, err := os.ReadFile(argsFile)
	require.NoError(t, err)
	assert.Equal(t, "aws\n--cluster-name\nprod\n--role-arn\narn:aws:iam::1:role/argo\n", string(got), "Argo CD's arguments, one each")
}
