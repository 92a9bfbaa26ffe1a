package cluster

import (
	"fmt"
	"net"
	"net/url"
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
//   - a name or server of a static cluster (flags, kubeconfig) is refused
//     (name-taken, duplicate-server);
//   - a name claimed by two or more Secrets is served by none of them until only one
//     is left (duplicate-name); so is a server URL under two or more names
//     (duplicate-server): two registrations would sweep one cluster twice;
//   - beyond Options.MaxClusters the Secrets are refused (cluster-cap): those already
//     served keep their place, the others are admitted in Secret name order.
//
// It returns the claims to serve and the refusals by Secret key. r.mu must be held.
func (r *Registry) admissionLocked() (map[string]*claim, map[string]refusal) {
	byName, byServer := map[string][]string{}, map[string][]string{}
	staticName, staticServer := map[string]string{}, map[string]string{}
	for _, m := range r.members {
		if m.secret == "" {
			staticName[m.c.Spec.Name] = m.c.Spec.Origin
			staticServer[normalServer(m.c.Spec.Server())] = m.c.Spec.Origin
		}
	}
	keys := sortedKeys(r.claims)
	for _, k := range keys {
		if c := r.claims[k]; c.err == nil {
			byName[c.spec.Name] = append(byName[c.spec.Name], k)
			if staticName[c.spec.Name] == "" { // refused anyway: it takes no server
				byServer[normalServer(c.spec.Server())] = append(byServer[normalServer(c.spec.Server())], k)
			}
		}
	}
	refused := map[string]refusal{}
	var fit []string
	for _, k := range keys {
		c := r.claims[k]
		if c.err != nil {
			continue
		}
		srv := normalServer(c.spec.Server())
		switch {
		case staticName[c.spec.Name] != "":
			refused[k] = refusal{ReasonNameTaken, fmt.Sprintf("cluster name %q is already registered by %s", c.spec.Name, staticName[c.spec.Name]), nil}
		case len(byName[c.spec.Name]) > 1:
			others := without(byName[c.spec.Name], k)
			refused[k] = refusal{ReasonDuplicateName, fmt.Sprintf("cluster name %q is also claimed by Secret %s: neither is served until one is deleted or renamed",
				c.spec.Name, strings.Join(others, ", ")), others}
		case staticServer[srv] != "":
			refused[k] = refusal{ReasonDuplicateServer, fmt.Sprintf("server %s is already served as %s", c.spec.Server(), staticServer[srv]), nil}
		case len(byServer[srv]) > 1:
			others := without(byServer[srv], k)
			refused[k] = refusal{ReasonDuplicateServer, fmt.Sprintf("server %s is also named by Secret %s: none of them is served until only one names it",
				c.spec.Server(), strings.Join(others, ", ")), others}
		default:
			fit = append(fit, k)
		}
	}
	admit := map[string]*claim{}
	room := r.opts.MaxClusters - len(staticName)
	// Those served now keep their place under the cap; then the others by Secret name.
	sort.SliceStable(fit, func(i, j int) bool { return r.servedLocked(fit[i]) && !r.servedLocked(fit[j]) })
	for _, k := range fit {
		if r.opts.MaxClusters > 0 && len(admit) >= room {
			refused[k] = refusal{ReasonCap, fmt.Sprintf("the service already serves %d clusters, its cap (--max-clusters=%d)", r.opts.MaxClusters, r.opts.MaxClusters), nil}
			continue
		}
		admit[k] = r.claims[k]
	}
	return admit, refused
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

// normalServer is an API server URL as a key: scheme and host lower-case, the
// default port and trailing slashes dropped.
func normalServer(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Host == "" {
		return strings.ToLower(strings.TrimRight(s, "/"))
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if (u.Scheme == "https" && port == "443") || (u.Scheme == "http" && port == "80") {
		port = ""
	}
	if port != "" {
		host = net.JoinHostPort(host, port)
	}
	return strings.ToLower(u.Scheme) + "://" + host + strings.TrimRight(u.EscapedPath(), "/")
}

// newClaim reads Secret s into a claim.
func (r *Registry) newClaim(s *corev1.Secret) *claim {
	key := s.Namespace + "/" + s.Name
	c := &claim{key: key, fp: fingerprint(s), uid: s.UID, name: strings.TrimSpace(secretValue(s, "name")),
		server: strings.TrimSpace(secretValue(s, "server")), pin: shardPin(s)}
	c.spec, c.err = SpecFromSecretAllowing(s, r.opts.ExecPlugins)
	if c.err != nil {
		c.reason = ReasonInvalid
		if isExecRefusal(c.err) {
			c.reason = ReasonExecNotAllowed
		}
	}
	return c
}
