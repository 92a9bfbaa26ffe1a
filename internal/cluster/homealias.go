package cluster

import "maps"

// ArgoCDInClusterName is the name Argo CD gives the cluster it runs in (its `in-cluster`
// cluster Secret, server ArgoCDInClusterServer).
const ArgoCDInClusterName = "in-cluster"

// homeCluster is what recognises an Argo CD Secret naming the home cluster (the one the
// service runs in, Source SourceHome): its name and server, and the names of every
// static cluster. Built by New; static clusters never change, so it is read without
// r.mu. The zero value (no home cluster) recognises nothing.
type homeCluster struct {
	name, server string
	static       map[string]bool
}

// homeClusterOf returns the homeCluster of the static clusters specs.
func homeClusterOf(specs []Spec) homeCluster {
	h := homeCluster{static: map[string]bool{}}
	for _, sp := range specs {
		h.static[sp.Name] = true
		if sp.Source == SourceHome && h.name == "" {
			h.name, h.server = sp.Name, sp.Server()
		}
	}
	return h
}

// isAlias reports whether an Argo CD Secret asking for cluster name at server names the
// home cluster: Argo CD's own `in-cluster` Secret, or one written for the home. Its
// server is https://kubernetes.default.svc (as Argo CD writes it, in any spelling
// normalServer accepts) or the home's own server (normalServer), and its name is the
// home's name, or `in-cluster` when no other static cluster has that name. Such a
// Secret is an alias of the home cluster (docs/safety.md, "Cluster Secrets are a trust
// boundary"): nothing else it says (credentials, namespaces) is used.
func (h homeCluster) isAlias(name, server string) bool {
	switch {
	case h.name == "" || name == "":
		return false
	case name != h.name && (name != ArgoCDInClusterName || h.static[name]):
		return false
	}
	srv := normalServerIn(server, "")
	for _, in := range []string{ArgoCDInClusterServer, "https://kubernetes.default.svc.cluster.local"} {
		if srv == normalServerIn(in, "") {
			return true
		}
	}
	return normalServer(server) == normalServer(h.server)
}

// setAliasesLocked makes the admitted aliases (Secret key -> claim) route to the home
// cluster, and logs each alias once, when it is new or changed. r.mu must be held.
func (r *Registry) setAliasesLocked(aliases map[string]*claim) {
	names := map[string]string{}
	keys := map[string]string{}
	for _, k := range sortedKeys(aliases) {
		name := aliases[k].name
		keys[k] = name
		if name != r.home.name {
			names[name] = r.home.name
		}
		if r.aliasKeys[k] != name {
			r.log.Info("Argo CD cluster Secret names the home cluster: its events go there, with the home's credentials and namespaces (the Secret's are not used)",
				"secret", k, "cluster", name, "home", r.home.name)
		}
	}
	if !maps.Equal(names, r.aliases) {
		r.dir.setAliases(names)
	}
	r.aliases, r.aliasKeys = names, keys
}

// resolveAliasLocked returns the cluster name that name stands for (itself unless it is
// an alias of the home cluster). r.mu must be held (read).
func (r *Registry) resolveAliasLocked(name string) string {
	if to, ok := r.aliases[name]; ok {
		return to
	}
	return name
}
