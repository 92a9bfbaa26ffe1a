package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// homeServer is the home cluster's server in the admission tests.
const homeServer = "https://127.0.0.1:6443"

// registryOf is a Registry of the static clusters specs (nothing built or run), for
// admission tests.
func registryOf(specs ...Spec) *Registry {
	r := &Registry{members: map[string]*member{}, secrets: map[string]string{}, claims: map[string]*claim{},
		invalid: map[string]Status{}, home: homeClusterOf(specs), dir: NewDirectory(false), log: testfix.Quiet()}
	for _, sp := range specs {
		r.members[sp.Name] = &member{c: Cluster{Spec: sp}, pin: -1}
	}
	return r
}

func staticSpec(name, source, server string) Spec {
	return Spec{Name: name, Source: source, Origin: source + " " + name, Config: &rest.Config{Host: server}}
}

// TestSecretNamingTheHomeClusterIsAnAlias: Argo CD's own `in-cluster` Secret (and one
// written for the home cluster) is an alias of the home cluster: admitted, not refused,
// outside the cap; every other case of a taken name or server stays refused, whatever
// the order, and two Secrets claiming one alias name are both refused.
func TestSecretNamingTheHomeClusterIsAnAlias(t *testing.T) {
	home := staticSpec("in-cluster", SourceHome, homeServer)
	hub := staticSpec("hub", SourceHome, homeServer)
	ctxIn := staticSpec("in-cluster", SourceKubeconfig, "https://10.0.0.5:6443")
	sec := func(key, name, server string, extra ...string) map[string]string {
		d := map[string]string{"key": key, "name": name, "server": server}
		for i := 0; i+1 < len(extra); i += 2 {
			d[extra[i]] = extra[i+1]
		}
		return d
	}
	const alias = "alias"
	tests := []struct {
		name    string
		static  []Spec
		max     int
		secrets []map[string]string
		want    map[string]string // Secret name -> alias, a refusal reason, or "invalid"
		routes  map[string]string // alias name -> home name
	}{
		{name: "Argo CD's in-cluster Secret", static: []Spec{home},
			secrets: []map[string]string{sec("in-cluster", "in-cluster", ArgoCDInClusterServer)},
			want:    map[string]string{"in-cluster": alias}},
		{name: "the in-cluster server written another way", static: []Spec{home},
			secrets: []map[string]string{sec("in-cluster", "in-cluster", "HTTPS://kubernetes.default.svc.cluster.local:443/")},
			want:    map[string]string{"in-cluster": alias}},
		{name: "the home's own server", static: []Spec{home},
			secrets: []map[string]string{sec("in-cluster", "in-cluster", "https://localhost:6443/")},
			want:    map[string]string{"in-cluster": alias}},
		{name: "its namespaces and credentials are not used, nor refused", static: []Spec{home},
			secrets: []map[string]string{sec("in-cluster", "in-cluster", ArgoCDInClusterServer, "namespaces", "team-a", "config", `{"execProviderConfig":{"command":"sh"}}`)},
			want:    map[string]string{"in-cluster": alias}},
		{name: "in-cluster for a home named otherwise routes there", static: []Spec{hub},
			secrets: []map[string]string{sec("in-cluster", "in-cluster", ArgoCDInClusterServer)},
			want:    map[string]string{"in-cluster": alias}, routes: map[string]string{"in-cluster": "hub"}},
		{name: "the home's own name", static: []Spec{hub},
			secrets: []map[string]string{sec("hub", "hub", ArgoCDInClusterServer)},
			want:    map[string]string{"hub": alias}},
		{name: "outside the cap", static: []Spec{home}, max: 1,
			secrets: []map[string]string{sec("in-cluster", "in-cluster", ArgoCDInClusterServer)},
			want:    map[string]string{"in-cluster": alias}},
		{name: "the home's name at another server: name taken", static: []Spec{home},
			secrets: []map[string]string{sec("in-cluster", "in-cluster", "https://10.0.0.9:6443")},
			want:    map[string]string{"in-cluster": ReasonNameTaken}},
		{name: "another name at the home's server: duplicate server", static: []Spec{home},
			secrets: []map[string]string{sec("other", "other", "https://localhost:6443")},
			want:    map[string]string{"other": ReasonDuplicateServer}},
		{name: "two aliases of one name: neither", static: []Spec{home},
			secrets: []map[string]string{sec("in-cluster", "in-cluster", ArgoCDInClusterServer), sec("copy", "in-cluster", homeServer)},
			want:    map[string]string{"in-cluster": ReasonDuplicateName, "copy": ReasonDuplicateName}},
		{name: "an alias and another cluster of its name: neither", static: []Spec{hub},
			secrets: []map[string]string{sec("in-cluster", "in-cluster", ArgoCDInClusterServer), sec("impostor", "in-cluster", "https://10.0.0.9:6443")},
			want:    map[string]string{"in-cluster": ReasonDuplicateName, "impostor": ReasonDuplicateName}},
		{name: "an alias of the home's name and an impostor: the impostor only", static: []Spec{home},
			secrets: []map[string]string{sec("in-cluster", "in-cluster", ArgoCDInClusterServer), sec("impostor", "in-cluster", "https://10.0.0.9:6443")},
			want:    map[string]string{"in-cluster": alias, "impostor": ReasonNameTaken}},
		{name: "in-cluster is a kubeconfig context's name: no alias", static: []Spec{hub, ctxIn},
			secrets: []map[string]string{sec("in-cluster", "in-cluster", homeServer)},
			want:    map[string]string{"in-cluster": ReasonNameTaken}},
		{name: "no home cluster: no alias", static: []Spec{staticSpec("a", SourceKubeconfig, homeServer)},
			secrets: []map[string]string{sec("in-cluster", "in-cluster", homeServer)},
			want:    map[string]string{"in-cluster": ReasonDuplicateServer}},
	}
	for _, tt := range tests {
		for _, order := range [][]int{ascending(len(tt.secrets)), descending(len(tt.secrets))} {
			t.Run(tt.name, func(t *testing.T) {
				r := registryOf(tt.static...)
				r.opts.MaxClusters = tt.max
				r.argoListed.Store(true)
				for _, i := range order {
					d := tt.secrets[i]
					c := r.newClaim(named(argoSecret(map[string]string{"name": d["name"], "server": d["server"], "namespaces": d["namespaces"], "config": d["config"]}), d["key"]))
					r.claims[c.key] = c
				}
				r.reconcileLocked() // nothing in these cases is served: no runtime is built
				admit, refused := r.admissionLocked()
				got := map[string]string{}
				for k, c := range r.claims {
					name := strings.TrimPrefix(k, "argocd/")
					switch rf, ok := refused[k]; {
					case c.err != nil:
						got[name] = "invalid: " + c.err.Error()
					case ok:
						got[name] = rf.reason
					case admit[k] != nil && admit[k].alias:
						got[name] = alias
					default:
						got[name] = "served"
					}
				}
				assert.Equal(t, tt.want, got)
				for name, to := range tt.routes {
					assert.Equal(t, to, r.resolveAliasLocked(name))
				}
				for k, c := range r.claims {
					if got[strings.TrimPrefix(k, "argocd/")] == alias {
						assert.NotContains(t, r.invalid, k, "an alias is no refused Secret (status, metric)")
						assert.Nil(t, c.spec.Config, "nothing of an alias is used")
					}
				}
			})
		}
	}
}

// TestHomeAliasIsLoggedOnceAtInfo: reconciling again (a resync, another Secret) logs
// nothing more, and nothing is warned.
func TestHomeAliasIsLoggedOnceAtInfo(t *testing.T) {
	var buf bytes.Buffer
	r := registryOf(staticSpec("hub", SourceHome, homeServer))
	r.log = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r.argoListed.Store(true)
	c := r.newClaim(named(argoSecret(map[string]string{"name": "in-cluster", "server": ArgoCDInClusterServer}), "in-cluster"))
	r.claims[c.key] = c
	for range 3 {
		r.reconcileLocked()
	}
	require.Equal(t, 1, strings.Count(buf.String(), "\n"), buf.String())
	assert.Contains(t, buf.String(), "level=INFO")
	assert.Contains(t, buf.String(), "secret=argocd/in-cluster")
	r.dir.set("hub", route{}) // the home, owned by another replica
	_, err := r.dir.Runtime("in-cluster")
	var oe *dispatch.OwnedElsewhereError
	require.ErrorAs(t, err, &oe, "in-cluster is the home's name now")
	assert.Equal(t, "hub", oe.Cluster)
}

// aliasRuns numbers the runs of TestArgoCDInClusterSecretRoutesToTheHomeCluster.
var aliasRuns atomic.Int64

// TestArgoCDInClusterSecretRoutesToTheHomeCluster: with real control planes, Argo CD's
// own in-cluster Secret (no credentials, a "namespaces" of its own) is no refused
// Secret: not in the statuses nor the refused metric; events naming it go to the home
// cluster with the home's scope (outside its "namespaces"); a second Secret of that
// name makes both refused (loud), and deleting the alias makes the name unknown.
func TestArgoCDInClusterSecretRoutesToTheHomeCluster(t *testing.T) {
	requireClusters(t)
	ctx := context.Background()
	kcA := cpA.Client()
	const argoNS = "argocd-home"
	_, err := kcA.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: argoNS}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	secrets := kcA.CoreV1().Secrets(argoNS)
	inCluster := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "in-cluster", Namespace: argoNS,
		Labels: map[string]string{ArgoCDSecretTypeLabel: ArgoCDSecretTypeCluster}},
		StringData: map[string]string{"name": "in-cluster", "server": ArgoCDInClusterServer, "namespaces": "argocd-only"}}
	_, err = secrets.Create(ctx, inCluster, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = secrets.Delete(context.Background(), "in-cluster", metav1.DeleteOptions{}) })

	home := Spec{Name: "hub", Source: SourceHome, Origin: "test", Config: cpA.RESTConfig()}
	s := startService(t, Options{Clusters: []Spec{home}, ArgoCDNamespace: argoNS})
	refusedCount := func() int { // configmap_attacher_cluster_secret_refused's series (metrics.go)
		n := 0
		for _, st := range s.reg.Statuses() {
			if !st.Registered && st.Reason != "" {
				n++
			}
		}
		return n
	}
	assert.Equal(t, []string{"hub"}, s.reg.Names())
	for _, st := range s.reg.Statuses() {
		assert.True(t, st.Registered, "%+v", st)
	}
	assert.Zero(t, refusedCount(), "the in-cluster Secret is not refused")
	assert.True(t, s.reg.Healthy("in-cluster"), "in-cluster is the home")

	fa := makeFixture(t, cpA, fmt.Sprintf("alias-%d", aliasRuns.Add(1)), "web-9", "cfg-9") // a namespace per run: -count=N
	code, resp := s.post(t, "in-cluster", fa.rs)
	require.Equal(t, 200, code, resp.text())
	assert.Equal(t, "hub", resp.Cluster)
	assert.Equal(t, []string{string(fa.rs.UID)}, fa.owners(t), "attached in the home, outside the Secret's namespaces")

	impostor := cpB.ArgoCDClusterSecret("impostor", "in-cluster")
	impostor.Namespace = argoNS
	_, err = secrets.Create(ctx, impostor, metav1.CreateOptions{})
	require.NoError(t, err)
	controlplane.Eventually(t, 30*time.Second, "both Secrets of in-cluster to be refused", func() error {
		refused := map[string]string{}
		for _, st := range s.reg.Statuses() {
			if !st.Registered {
				refused[st.Origin] = st.Reason
			}
		}
		want := map[string]string{"Argo CD Secret " + argoNS + "/in-cluster": ReasonDuplicateName, "Argo CD Secret " + argoNS + "/impostor": ReasonDuplicateName}
		if fmt.Sprint(refused) != fmt.Sprint(want) {
			return fmt.Errorf("refused: %v", refused)
		}
		return nil
	})
	assert.Equal(t, 2, refusedCount())
	code, resp = s.post(t, "in-cluster", fa.rs)
	assert.Equal(t, 400, code, resp.text())

	require.NoError(t, secrets.Delete(ctx, "impostor", metav1.DeleteOptions{}))
	controlplane.Eventually(t, 30*time.Second, "the alias back", func() error {
		if !s.reg.Healthy("in-cluster") || refusedCount() != 0 {
			return errors.New("not yet")
		}
		return nil
	})
	require.NoError(t, secrets.Delete(ctx, "in-cluster", metav1.DeleteOptions{}))
	controlplane.Eventually(t, 30*time.Second, "in-cluster unknown", func() error {
		if s.reg.Healthy("in-cluster") {
			return errors.New("still the home")
		}
		return nil
	})
	code, resp = s.post(t, "in-cluster", fa.rs)
	assert.Equal(t, 400, code)
	assert.Contains(t, resp.text(), `unknown cluster "in-cluster"`)
	assert.Equal(t, []string{"hub"}, s.reg.Names())
}

// TestOneShotCommandsSkipTheInClusterSecret: gc, status and attach with
// --argocd-clusters (Sources.All) skip Argo CD's in-cluster Secret without an error:
// the home cluster is among the static clusters already.
func TestOneShotCommandsSkipTheInClusterSecret(t *testing.T) {
	requireClusters(t)
	ctx := context.Background()
	const argoNS = "argocd-oneshot"
	_, err := cpA.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: argoNS}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	secrets := cpA.Client().CoreV1().Secrets(argoNS)
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "in-cluster", Labels: map[string]string{ArgoCDSecretTypeLabel: ArgoCDSecretTypeCluster}},
			StringData: map[string]string{"name": "in-cluster", "server": ArgoCDInClusterServer}},
		cpB.ArgoCDClusterSecret("cluster-b", "prod-b"),
	} {
		s.Namespace = argoNS
		_, err := secrets.Create(ctx, s, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = secrets.Delete(context.Background(), s.Name, metav1.DeleteOptions{}) })
	}
	specs, bad, err := Sources{Kubeconfig: mergedKubeconfig(t), Context: "a", HomeName: "hub", ArgoCDNamespace: argoNS}.All(ctx)
	require.NoError(t, err)
	assert.Empty(t, bad)
	var names []string
	for _, sp := range specs {
		names = append(names, sp.Name)
	}
	assert.Equal(t, []string{"hub", "prod-b"}, names)
}
