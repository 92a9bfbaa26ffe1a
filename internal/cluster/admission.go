package cluster

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Why an Argo CD cluster Secret is not served (Status.Reason, the reason label of
// configmap_attacher_cluster_secret_refused).
const (
	ReasonInvalid         = "invalid"
	ReasonExecNotAllowed  = "exec-not-allowed"
	ReasonDuplicateName   = "duplicate-name"
	ReasonDuplicateServer = "duplicate-server"
	ReasonNameTaken       = "name-taken"
	ReasonCap             = "cluster-cap"
)

// claim is what one Argo CD cluster Secret asks for: a Spec, or why it has none.
type claim struct {
	key, fp string
	uid     types.UID
	spec    Spec
	err     error
	reason  string
	pin     int    // the shard its `shard` field pins the cluster to, -1 for none (ownership.go)
	name    string // the cluster name it asks for, even when invalid
	server  string
	// alias: the Secret names the home cluster (homealias.go); spec holds only its name.
	alias bool
}

// refusal is why a valid claim is not admitted, and the other Secrets involved.
type refusal struct {
	reason, why string
	others      []string
}

// admissionLocked decides which Argo CD Secrets are served, from every Secret known
// (r.claims), the same way whatever order they arrived in, so that a restart decides
// as the running service did:
//
//   - a name of a static cluster (flags, kubeconfig) is refused (name-taken), and so is
//     its server unless the namespaces are disjoint (duplicate-server);
//   - a name claimed by two or more Secrets is served by none of them until only one
//     is left (duplicate-name); so is one API server (normalServer) named by Secrets
//     whose namespaces overlap (duplicate-server): two registrations would sweep the
//     same objects twice. Disjoint namespaces ("team-a" and "team-b") are two logical
//     clusters of one apiserver, each limited to its own namespaces, and are served;
//   - beyond Options.MaxClusters the Secrets are refused (cluster-cap): those already
//     served keep their place, the others are admitted in Secret name order;
//   - a Secret naming the home cluster (homeCluster.isAlias: Argo CD's own `in-cluster`
//     Secret) is an alias of it, admitted outside the cap and taking no server, unless
//     another Secret claims its name as above (duplicate-name).
//
// It returns the claims to serve (aliases among them, claim.alias) and the refusals by
// Secret key. r.mu must be held.
func (r *Registry) admissionLocked() (map[string]*claim, map[string]refusal) {
	byName := map[string][]string{}
	staticName, byServer := map[string]string{}, map[string][]scope{}
	for _, m := range r.members {
		if m.secret == "" {
			staticName[m.c.Spec.Name] = m.c.Spec.Origin
			srv := normalServer(m.c.Spec.Server())
			byServer[srv] = append(byServer[srv], scope{who: m.c.Spec.Origin, static: true, nss: r.namespacesOf(m.c.Spec)})
		}
	}
	keys := sortedKeys(r.claims)
	for _, k := range keys {
		if c := r.claims[k]; c.err == nil {
			byName[c.spec.Name] = append(byName[c.spec.Name], k)
			if staticName[c.spec.Name] == "" && !c.alias { // refused anyway, or the home's: it takes no server
				srv := normalServer(c.spec.Server())
				byServer[srv] = append(byServer[srv], scope{who: k, nss: r.namespacesOf(c.spec)})
			}
		}
	}
	refused := map[string]refusal{}
	admit := map[string]*claim{}
	var fit []string
	for _, k := range keys {
		c := r.claims[k]
		if c.err != nil {
			continue
		}
		if c.alias { // the home's: neither a cluster of its own nor under the cap
			if rf, ok := r.aliasConflict(c, staticName, byName); ok {
				refused[k] = rf
			} else {
				admit[k] = c
			}
			continue
		}
		if rf, ok := r.refuseClaim(c, staticName, byName, byServer); ok {
			refused[k] = rf
			continue
		}
		fit = append(fit, k)
	}
	room := r.opts.MaxClusters - len(staticName)
	// Those served now keep their place under the cap; then the others by Secret name.
	sort.SliceStable(fit, func(i, j int) bool { return r.servedLocked(fit[i]) && !r.servedLocked(fit[j]) })
	var fitted []string
	for _, k := range fit {
		if r.opts.MaxClusters > 0 && len(fitted) >= room {
			refused[k] = refusal{ReasonCap, fmt.Sprintf("the service already serves %d clusters, its cap (--max-clusters=%d)", r.opts.MaxClusters, r.opts.MaxClusters), nil}
			continue
		}
		admit[k] = r.claims[k]
		fitted = append(fitted, k)
	}
	return admit, refused
}

// aliasConflict says why the alias claim c of the home cluster is refused, if it is:
// another Secret claims its name (another alias, or, for a name that is no static
// cluster's, any Secret), and neither is served, as for any duplicate name.
func (r *Registry) aliasConflict(c *claim, staticName map[string]string, byName map[string][]string) (refusal, bool) {
	var others []string
	for _, o := range without(byName[c.spec.Name], c.key) {
		if staticName[c.spec.Name] == "" || r.claims[o].alias {
			others = append(others, o)
		}
	}
	if len(others) == 0 {
		return refusal{}, false
	}
	return refusal{ReasonDuplicateName, fmt.Sprintf("cluster name %q (the home cluster) is also claimed by Secret %s: neither is served until one is deleted or renamed",
		c.spec.Name, strings.Join(others, ", ")), others}, true
}

// scope is one cluster of an API server: the Secret (namespace/name) or static
// cluster's origin that names it, and the namespaces it is limited to (empty: all).
type scope struct {
	who    string
	static bool
	nss    []string
}

// refuseClaim says why the valid claim c is not served, if it is not (admissionLocked).
func (r *Registry) refuseClaim(c *claim, staticName map[string]string, byName map[string][]string, byServer map[string][]scope) (refusal, bool) {
	k, name := c.key, c.spec.Name
	if staticName[name] != "" {
		return refusal{ReasonNameTaken, fmt.Sprintf("cluster name %q is already registered by %s", name, staticName[name]), nil}, true
	}
	if len(byName[name]) > 1 {
		others := without(byName[name], k)
		return refusal{ReasonDuplicateName, fmt.Sprintf("cluster name %q is also claimed by Secret %s: neither is served until one is deleted or renamed",
			name, strings.Join(others, ", ")), others}, true
	}
	var static, others []string
	mine := r.namespacesOf(c.spec)
	for _, o := range byServer[normalServer(c.spec.Server())] {
		switch {
		case o.who == k || !namespacesOverlap(o.nss, mine):
		case o.static:
			static = append(static, o.who)
		default:
			others = append(others, o.who)
		}
	}
	switch {
	case len(static) > 0:
		return refusal{ReasonDuplicateServer, fmt.Sprintf("server %s (%s) is already served as %s", c.spec.Server(),
			describeNamespaces(mine), strings.Join(static, ", ")), nil}, true
	case len(others) > 0:
		return refusal{ReasonDuplicateServer, fmt.Sprintf("server %s (%s) is also named by Secret %s with overlapping namespaces: none of them is served until only one names it or their namespaces are disjoint",
			c.spec.Server(), describeNamespaces(mine), strings.Join(others, ", ")), others}, true
	}
	return refusal{}, false
}

// namespacesOf returns the namespaces cluster sp's caches, watchers and sweeps are
// limited to (empty: all): its own (an Argo CD Secret's "namespaces"), else the
// service's (serve --watch-namespace, RuntimeOptions.Namespace), as buildCaches does.
func (r *Registry) namespacesOf(sp Spec) []string {
	switch {
	case len(sp.Namespaces) > 0:
		return sp.Namespaces
	case r.opts.Runtime.Namespace != "":
		return []string{r.opts.Runtime.Namespace}
	}
	return nil
}

// namespacesOverlap reports whether two clusters limited to namespaces a and b (empty:
// all) share a namespace.
func namespacesOverlap(a, b []string) bool {
	if len(a) == 0 || len(b) == 0 {
		return true
	}
	for _, ns := range a {
		if slices.Contains(b, ns) {
			return true
		}
	}
	return false
}

func describeNamespaces(nss []string) string {
	if len(nss) == 0 {
		return "all namespaces"
	}
	return "namespaces " + strings.Join(nss, ", ")
}

// servedLocked reports whether Secret key's cluster is registered now.
func (r *Registry) servedLocked(key string) bool {
	_, ok := r.secrets[key]
	return ok
}

func without(keys []string, k string) []string {
	out := make([]string, 0, len(keys))
	for _, x := range keys {
		if x != k {
			out = append(out, x)
		}
	}
	return out
}

// normalServer is an API server URL as a key, so that one apiserver written several
// ways is one server (docs/safety.md): scheme and host lower case, the default port
// dropped, the path cleaned and its trailing slashes dropped, a host name's trailing
// dot dropped, an IP address in canonical form (::ffff:10.0.0.1 is 10.0.0.1),
// "localhost" (and *.localhost), every loopback address and the unspecified address
// (0.0.0.0 and ::, which a connection reaches this host through) one host, and in a Pod
// kubernetes.default.svc[.cluster.local] the Service address the Pod's environment
// names (KUBERNETES_SERVICE_HOST, which rest.InClusterConfig uses). No DNS lookup is
// made: two other names of one address are two servers here (a lookup would make
// admission wait on the network and change its decision with DNS answers).
func normalServer(s string) string { return normalServerIn(s, os.Getenv("KUBERNETES_SERVICE_HOST")) }

// normalServerIn is normalServer in a Pod whose Kubernetes Service host is svcHost ("":
// not in a Pod).
func normalServerIn(s, svcHost string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Host == "" {
		return strings.ToLower(strings.TrimRight(strings.TrimSpace(s), "/"))
	}
	scheme := strings.ToLower(u.Scheme)
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if svcHost != "" && (host == "kubernetes.default.svc" || host == "kubernetes.default.svc.cluster.local") {
		host = strings.ToLower(svcHost)
	}
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	// A connection to the unspecified address (0.0.0.0, ::) is one to this host.
	if ip := net.ParseIP(host); (ip != nil && (ip.IsLoopback() || ip.IsUnspecified())) || host == "localhost" || strings.HasSuffix(host, ".localhost") {
		host = "localhost"
	}
	port := u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	p := strings.TrimRight(path.Clean("/"+u.EscapedPath()), "/")
	return scheme + "://" + host + p
}

// newClaim reads Secret s into a claim.
func (r *Registry) newClaim(s *corev1.Secret) *claim {
	key := s.Namespace + "/" + s.Name
	c := &claim{key: key, fp: fingerprint(s), uid: s.UID, name: strings.TrimSpace(secretValue(s, "name")),
		server: strings.TrimSpace(secretValue(s, "server")), pin: shardPin(s)}
	if r.home.isAlias(c.name, c.server) { // nothing else it says is used: not even parsed
		c.alias, c.spec = true, Spec{Name: c.name, Source: SourceArgoCD, Origin: "Argo CD Secret " + key}
		return c
	}
	c.spec, c.err = specFromSecret(s, r.opts.ExecPlugins) // no credentials: each registration binds its own
	if c.err != nil {
		c.reason = ReasonInvalid
		if isExecRefusal(c.err) {
			c.reason = ReasonExecNotAllowed
		}
	}
	return c
}
