package cluster

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// Ownership decides which registered clusters run on this replica when several replicas
// share the fleet (package shard implements it on Kubernetes Leases). pin is the shard
// an Argo CD cluster Secret's `shard` field names, -1 for none.
type Ownership interface {
	// Notify registers fn, called whenever the clusters this replica owns may have
	// changed; fn must stop the runtimes of clusters no longer owned before it returns
	// (within its ctx). The registry registers its Reconcile in New.
	Notify(fn func(ctx context.Context))
	// Owns reports whether this replica is to run cluster name now.
	Owns(name string, pin int) bool
	// Owner returns the identity and the forwarding address of the replica owning
	// cluster name, "" when none does at the moment.
	Owner(name string, pin int) (identity, address string)
}

// shardPin is the shard an Argo CD cluster Secret pins its cluster to (its `shard`
// field, as Argo CD's application controller reads it), -1 when absent or not a
// non-negative number (package shard then ignores it: an invalid pin never leaves a
// cluster unowned).
func shardPin(s *corev1.Secret) int {
	v := strings.TrimSpace(secretValue(s, "shard"))
	if v == "" {
		return -1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// ownerOf is the Directory's view of where a cluster not served here is owned.
func (r *Registry) ownerOf(name string) (identity, address string) {
	r.mu.RLock()
	m, ok := r.members[name]
	r.mu.RUnlock()
	if !ok {
		return "", ""
	}
	return r.opts.Ownership.Owner(name, m.pin)
}

// Reconcile starts the runtime of every registered cluster this replica now owns and
// stops the runtime of every one it no longer owns, waiting (while ctx lives) until
// those have stopped: a replica that loses a shard stops acting on its clusters before
// it returns (fencing, docs/design.md "Fleet"). Without Ownership, or before Run, it
// does nothing.
func (r *Registry) Reconcile(ctx context.Context) {
	own := r.opts.Ownership
	if own == nil {
		return
	}
	var stopping []*member
	r.mu.Lock()
	if r.runCtx == nil || r.runCtx.Err() != nil {
		r.mu.Unlock()
		return
	}
	for _, m := range r.members {
		owns, running := own.Owns(m.c.Spec.Name, m.pin), m.cancel != nil
		switch {
		case owns && !running:
			r.startOwnedLocked(m)
		case !owns && running:
			stopping = append(stopping, r.releaseLocked(m))
		}
	}
	r.mu.Unlock()
	for _, old := range stopping {
		select {
		case <-old.done:
		case <-ctx.Done():
			r.log.Warn("a released cluster's runtime is still stopping", "cluster", old.c.Spec.Name)
		}
	}
}

// releaseLocked stops m's runtime here (the cluster stays registered, routed to its
// owner) and returns a copy holding what to wait for. r.mu must be held.
func (r *Registry) releaseLocked(m *member) *member {
	old := &member{c: m.c, done: m.done}
	r.dir.unroute(m.c.Spec.Name, m.rt)
	m.cancel()
	m.healthMu.Lock()
	m.rt, m.cancel, m.done = nil, nil, nil
	m.probed, m.reachable, m.probeErr = false, false, ""
	m.healthMu.Unlock()
	r.log.Info("cluster released: owned by another replica now", "cluster", m.c.Spec.Name)
	return old
}

// Owned returns the names of the clusters whose runtime runs on this replica, sorted.
func (r *Registry) Owned() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []string
	for name, m := range r.members {
		if m.cancel != nil {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Pins returns every registered cluster with its pin (-1 for none), for the fleet's
// view of which clusters have an owner.
func (r *Registry) Pins() map[string]int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]int, len(r.members))
	for name, m := range r.members {
		out[name] = m.pin
	}
	return out
}

// argoCDClient is the client that reads the Argo CD cluster Secrets: Options'
// ArgoCDClient, else one of the default cluster's (which this replica may not own).
func (r *Registry) argoCDClient() (kubernetes.Interface, error) {
	if r.opts.ArgoCDClient != nil {
		return r.opts.ArgoCDClient, nil
	}
	r.mu.RLock()
	m := r.members[r.defName]
	r.mu.RUnlock()
	if m.c.Clients != nil {
		return m.c.Clients.Kube, nil
	}
	cl, err := kube.NewClients(withRequestDeadline(m.c.Spec.Config, r.opts.RequestTimeout))
	if err != nil {
		return nil, err
	}
	return cl.Kube, nil
}

// elsewhere is the status of a cluster another replica owns: healthy here (its events
// are forwarded), neither probed nor cached.
func elsewhere(st Status) Status {
	st.Elsewhere, st.Healthy, st.Reachable, st.Synced = true, true, false, false
	st.LastProbe, st.Since = time.Time{}, time.Time{}
	return st
}
