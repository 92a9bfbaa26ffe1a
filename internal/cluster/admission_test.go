package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// TestOneAPIServerWrittenSeveralWaysIsOneServer: the duplicate-server check compares
// apiservers, not URL strings; no DNS lookup is made, so only names that are the same
// address without one (localhost, loopback, the Pod's Kubernetes Service) are merged.
func TestOneAPIServerWrittenSeveralWaysIsOneServer(t *testing.T) {
	const svc = "10.96.0.1"
	tests := []struct {
		name   string
		a, b   string
		svc    string
		merged bool
	}{
		{name: "identical", a: "https://127.0.0.1:6443", b: "https://127.0.0.1:6443", merged: true},
		{name: "localhost and 127.0.0.1", a: "https://127.0.0.1:6443", b: "https://localhost:6443", merged: true},
		{name: "a trailing slash", a: "https://127.0.0.1:6443", b: "https://127.0.0.1:6443/", merged: true},
		{name: "upper-case scheme and host", a: "https://127.0.0.1:6443", b: "HTTPS://LOCALHOST:6443", merged: true},
		{name: "the default https port", a: "https://h.example", b: "https://h.example:443", merged: true},
		{name: "the default http port", a: "http://h.example", b: "http://h.example:80/", merged: true},
		{name: "a host name's trailing dot", a: "https://h.example.:6443", b: "https://H.example:6443", merged: true},
		{name: "IPv6 loopback and localhost", a: "https://[::1]:6443", b: "https://localhost:6443", merged: true},
		{name: "IPv6 written two ways", a: "https://[2001:db8:0:0::1]:6443", b: "https://[2001:db8::1]:6443", merged: true},
		{name: "the unspecified IPv4 address and loopback", a: "https://0.0.0.0:6443", b: "https://127.0.0.1:6443", merged: true},
		{name: "the unspecified IPv6 address and loopback", a: "https://[::]:6443", b: "https://localhost:6443", merged: true},
		{name: "IPv4-mapped IPv6 loopback", a: "https://[::ffff:127.0.0.1]:6443", b: "https://localhost:6443", merged: true},
		{name: "userinfo ignored", a: "https://x@127.0.0.1:6443", b: "https://127.0.0.1:6443", merged: true},
		{name: "a path climbing out cleaned", a: "https://127.0.0.1:6443/a/../", b: "https://127.0.0.1:6443", merged: true},
		{name: "IPv4-mapped IPv6", a: "https://[::ffff:10.0.0.1]:6443", b: "https://10.0.0.1:6443", merged: true},
		{name: "a path cleaned", a: "https://proxy.example/k8s/c1/", b: "https://proxy.example//k8s/./c1", merged: true},
		{name: "kubernetes.default.svc in a Pod", a: "https://kubernetes.default.svc", b: "https://" + svc + ":443", svc: svc, merged: true},
		{name: "another port", a: "https://127.0.0.1:6443", b: "https://127.0.0.1:6444"},
		{name: "another scheme", a: "https://h.example", b: "http://h.example"},
		{name: "another path: another cluster behind one proxy", a: "https://proxy.example/k8s/c1", b: "https://proxy.example/k8s/c2"},
		{name: "a path's case kept", a: "https://proxy.example/k8s/C1", b: "https://proxy.example/k8s/c1"},
		{name: "two names of one host: no DNS lookup", a: "https://a.example", b: "https://b.example"},
		{name: "kubernetes.default.svc outside a Pod", a: "https://kubernetes.default.svc", b: "https://" + svc + ":443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := normalServerIn(tt.a, tt.svc), normalServerIn(tt.b, tt.svc)
			if tt.merged {
				assert.Equal(t, a, b)
			} else {
				assert.NotEqual(t, a, b)
			}
		})
	}
}

// TestDuplicateServerRefusedOnlyWhenNamespacesOverlap: Secrets naming one apiserver
// with disjoint "namespaces" are logical clusters, all served; overlapping ones (a
// namespace in common, or one of them unlimited) are all refused, whatever their order.
func TestDuplicateServerRefusedOnlyWhenNamespacesOverlap(t *testing.T) {
	type sec struct{ name, server, namespaces string }
	tests := []struct {
		name    string
		secrets []sec
		served  []string
	}{
		{name: "disjoint namespaces: both served",
			secrets: []sec{{"team-a", "https://127.0.0.1:6443", "team-a"}, {"team-b", "https://localhost:6443/", "team-b"}},
			served:  []string{"team-a", "team-b"}},
		{name: "several disjoint namespaces each: all served",
			secrets: []sec{{"x", "https://h.example", "a,b"}, {"y", "https://h.example:443", "c"}, {"z", "https://H.example", "d,e"}},
			served:  []string{"x", "y", "z"}},
		{name: "a namespace in common: both refused",
			secrets: []sec{{"x", "https://h.example", "a,b"}, {"y", "https://h.example", "b,c"}}},
		{name: "one unlimited: both refused",
			secrets: []sec{{"all", "https://127.0.0.1:6443", ""}, {"team-a", "https://localhost:6443", "team-a"}}},
		{name: "an unlimited one refuses all, the disjoint others too",
			secrets: []sec{{"a", "https://h.example", "a"}, {"all", "https://h.example", ""}, {"b", "https://h.example", "b"}}},
		{name: "an overlapping pair beside a disjoint one: the disjoint one served",
			secrets: []sec{{"x", "https://h.example", "a"}, {"y", "https://h.example", "a"}, {"z", "https://h.example", "z"}},
			served:  []string{"z"}},
		{name: "other servers: all served",
			secrets: []sec{{"x", "https://h.example", ""}, {"y", "https://h.example:6443", ""}},
			served:  []string{"x", "y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, order := range [][]int{ascending(len(tt.secrets)), descending(len(tt.secrets))} {
				r := &Registry{members: map[string]*member{}, secrets: map[string]string{}, claims: map[string]*claim{}}
				for _, i := range order {
					s := tt.secrets[i]
					c := r.newClaim(named(argoSecret(map[string]string{"name": s.name, "server": s.server, "namespaces": s.namespaces}), s.name))
					require.NoError(t, c.err)
					r.claims[c.key] = c
				}
				admit, refused := r.admissionLocked()
				var served []string
				for _, k := range sortedKeys(admit) {
					served = append(served, admit[k].spec.Name)
				}
				assert.Equal(t, tt.served, served)
				for k, rf := range refused {
					assert.Equal(t, ReasonDuplicateServer, rf.reason, k)
					assert.NotEmpty(t, rf.others, "the refusal names the other Secrets: %s", rf.why)
					assert.Contains(t, rf.why, "overlapping namespaces")
				}
				assert.Len(t, refused, len(tt.secrets)-len(tt.served))
			}
		})
	}
}

// TestSecretForAStaticClustersServerRefusedUnlessNamespacesAreDisjoint: a static
// cluster (all namespaces) keeps its server; a Secret for it is refused.
func TestSecretForAStaticClustersServerRefusedUnlessNamespacesAreDisjoint(t *testing.T) {
	for _, tt := range []struct {
		name, staticNamespaces, watchNamespace string
		served                                 bool
	}{
		{name: "static cluster of all namespaces", served: false},
		{name: "static cluster of other namespaces", staticNamespaces: "hub", served: true},
		{name: "static cluster of the same namespace", staticNamespaces: "team-a", served: false},
		{name: "every cluster cached in another namespace (--watch-namespace)", watchNamespace: "hub", served: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hub, err := specFromSecret(named(argoSecret(map[string]string{"name": "hub", "server": "https://127.0.0.1:6443",
				"namespaces": tt.staticNamespaces}), "hub"), nil)
			require.NoError(t, err)
			r := &Registry{members: map[string]*member{"hub": {c: Cluster{Spec: hub}}}, secrets: map[string]string{}, claims: map[string]*claim{},
				opts: Options{Runtime: RuntimeOptions{Namespace: tt.watchNamespace}}}
			c := r.newClaim(named(argoSecret(map[string]string{"name": "team-a", "server": "https://localhost:6443", "namespaces": "team-a"}), "team-a"))
			r.claims[c.key] = c
			admit, refused := r.admissionLocked()
			if tt.served {
				assert.Contains(t, admit, c.key)
				return
			}
			assert.Equal(t, ReasonDuplicateServer, refused[c.key].reason)
			assert.Contains(t, refused[c.key].why, "already served as Argo CD Secret argocd/hub")
		})
	}
}

func named(s *corev1.Secret, name string) *corev1.Secret {
	s.Name = name
	return s
}

func ascending(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func descending(n int) []int {
	out := ascending(n)
	for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
