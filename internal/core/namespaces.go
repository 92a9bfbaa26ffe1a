package core

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// NamespacePolicy restricts the namespaces events may act in (serve --namespaces and
// --exclude-namespaces). The zero value allows every namespace.
type NamespacePolicy struct {
	// Allow, when non-empty, lists the only namespaces events may act in.
	Allow []string
	// Deny lists namespaces events may never act in; it wins over Allow.
	Deny []string
	// Limit, when non-empty, lists the only namespaces of one cluster (its Argo CD
	// cluster Secret's "namespaces"), on top of Allow and Deny; LimitBy names that
	// cluster for the refusal.
	Limit   []string
	LimitBy string
}

// SystemNamespaces are the namespaces Kubernetes itself keeps objects in: kube-system
// (control-plane config such as extension-apiserver-authentication), kube-public
// (cluster-info, read by bootstrapping nodes) and kube-node-lease.
var SystemNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

// DefaultExcludedNamespaces returns what a long-running service excludes unless told
// otherwise: SystemNamespaces and own, the service's own namespace (its Leases and
// Secrets), when not empty. A one-shot command run with the user's own credentials
// needs no such default.
func DefaultExcludedNamespaces(own string) []string {
	out := slices.Clone(SystemNamespaces)
	if own != "" && !slices.Contains(out, own) {
		out = append(out, own)
	}
	return out
}

// ParseNamespacePolicy builds a policy from comma lists of namespaces; field names the
// flag in errors (*FieldError, ErrInvalid).
func ParseNamespacePolicy(allow, deny []string) (NamespacePolicy, error) {
	var p NamespacePolicy
	for _, l := range []struct {
		field string
		in    []string
		out   *[]string
	}{{"namespaces", allow, &p.Allow}, {"exclude-namespaces", deny, &p.Deny}} {
		for _, item := range l.in {
			for _, ns := range strings.Split(item, ",") {
				ns = strings.TrimSpace(ns)
				if ns == "" {
					continue
				}
				if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
					return NamespacePolicy{}, Invalidf(l.field, "%q is not a valid namespace: %s", Clip(ns), strings.Join(errs, "; "))
				}
				if !slices.Contains(*l.out, ns) {
					*l.out = append(*l.out, ns)
				}
			}
		}
	}
	return p, nil
}

// Restricted reports whether the policy limits anything.
func (p NamespacePolicy) Restricted() bool { return len(p.Allow) > 0 || len(p.Deny) > 0 }

// Check returns nil when events may act in ns, and a *RefusedError (ErrRefused) naming
// the namespace and the rule otherwise.
func (p NamespacePolicy) Check(ns string) error {
	if slices.Contains(p.Deny, ns) {
		return refusedf("namespace %q is excluded by the service's namespace policy (--exclude-namespaces)", Clip(ns))
	}
	if len(p.Allow) > 0 && !slices.Contains(p.Allow, ns) {
		return refusedf("namespace %q is not among the namespaces this service may act in (--namespaces %s)", Clip(ns), strings.Join(p.Allow, ","))
	}
	if len(p.Limit) > 0 && !slices.Contains(p.Limit, ns) {
		return refusedf("namespace %q is not among the namespaces of %s (namespaces: %s)", Clip(ns), p.LimitBy, strings.Join(p.Limit, ","))
	}
	return nil
}

// String renders the policy for logs ("all", "only a,b", "all but kube-system").
func (p NamespacePolicy) String() string {
	switch {
	case !p.Restricted():
		return "all"
	case len(p.Allow) > 0 && len(p.Deny) > 0:
		return fmt.Sprintf("only %s, never %s", strings.Join(p.Allow, ","), strings.Join(p.Deny, ","))
	case len(p.Allow) > 0:
		return "only " + strings.Join(p.Allow, ",")
	}
	return "all but " + strings.Join(p.Deny, ",")
}

// CheckNamespace applies the Attacher's namespace policy (Config.Namespaces) to ns.
func (a *Attacher) CheckNamespace(ns string) error { return a.cfg.Namespaces.Check(ns) }
