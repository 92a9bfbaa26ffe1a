package watch

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
)

// Listed reports whether a cached workload lists the config object kind namespace/name by
// name (cache.Cache.Listed).
type Listed func(kind core.Kind, namespace, name string) bool

// RevisionSources is what the revision side reads.
type RevisionSources struct {
	// Informers are the metadata informers of config objects by kind
	// (cache.Cache.RevisionInformers).
	Informers map[core.Kind]toolscache.SharedIndexInformer
	// Listed, when set, makes an unlabelled object a workload lists by name a candidate
	// too, so that one created after its ReplicaSet is attached at once.
	Listed Listed
	// ReplicaSets (cache.Cache.ReplicaSetInformer) and Uses (cache.UsesOf: the
	// core.UsesKey of every config object a cached ReplicaSet uses), when both are set,
	// make a candidate that no owner holds yet looked at again when a ReplicaSet that uses
	// it appears: its first use, attached from the cache whatever the way in (firstUses).
	ReplicaSets toolscache.SharedIndexInformer
	Uses        func(obj any) []string
}

// NewRevisions returns the revision side (on every way in, safety rule 9): a Watcher that
// dispatches every candidate config object of src's informers that appears, gains the
// opt-in label, loses an owner or gets its first user, as a revision event on the
// revision path, to d, so that its live users are attached (docs/design.md, "The
// revision side"). Errors: no informer or no dispatcher.
func NewRevisions(src RevisionSources, d Dispatcher, opts Options) (*Watcher, error) {
	feeds := map[string]feed{}
	for kind, inf := range src.Informers {
		if inf != nil {
			feeds[string(kind)] = revisionFeed{kind: kind, inf: inf, listed: src.Listed, users: src.ReplicaSets, uses: src.Uses}
		}
	}
	return newWatcher("revisions", feeds, d, opts)
}

// revisionFeed is the revision side's feed of one kind of config object.
type revisionFeed struct {
	kind   core.Kind
	inf    toolscache.SharedIndexInformer
	listed Listed
	users  toolscache.SharedIndexInformer // nil: no first-use look
	uses   func(obj any) []string
}

func (f revisionFeed) informer() toolscache.SharedIndexInformer { return f.inf }

// admit queues a candidate (isCandidate): other config objects cost nothing.
func (f revisionFeed) admit(obj any) bool { return f.isCandidate(obj) }

// relevant: an object that was a candidate stays one for this update (a PUT that wiped
// its ownerReferences leaves an unlabelled, listed revision with none); one that becomes
// one (gains the opt-in label) is one. The service's own owner additions change neither
// labels nor lose an owner: not queued.
func (f revisionFeed) relevant(old, obj any) bool {
	return revisionNeedsLook(old, obj) && (f.isCandidate(old) || f.isCandidate(obj))
}

// request turns base into a revision event of m on the revision path (base's event
// stays, for GaveUp).
func (f revisionFeed) request(base dispatch.Request, m metav1.Object) dispatch.Request {
	base.Path = dispatch.PathRevision
	base.Revision = &core.RevisionEvent{Cluster: base.Event.Cluster, Kind: f.kind, Namespace: m.GetNamespace(),
		Name: m.GetName(), UID: m.GetUID()}
	return base
}

// nudgedBy is the informer whose changes queue objects of this feed too, and which:
// the ReplicaSets, and firstUses.
func (f revisionFeed) nudgedBy() (toolscache.SharedIndexInformer, func(obj any) []any) {
	if f.users == nil || f.uses == nil {
		return nil, nil
	}
	return f.users, f.firstUses
}

// firstUses returns the cached config objects of the feed's kind that the ReplicaSet rs
// uses and that are candidates no live owner holds yet (heldAlive): rs is their first
// user. In a GitOps sync the revision is created before its ReplicaSet, and the
// next sync can prune it until it is owned (Argo CD prunes no object with owners): the
// cache sees the ReplicaSet as soon as any way in could, so its first use is attached
// from here without waiting for the event to travel (an EventSource, the EventBus, a
// Sensor: docs/design.md, "The revision side"). A revision owned already is protected
// from such a prune and from the collector while its owners live; its next users come
// by the ways in, or by the revision side when it loses an owner.
func (f revisionFeed) firstUses(rs any) []any {
	var out []any
	for _, key := range f.uses(rs) {
		kind, namespace, name, ok := core.SplitUsesKey(key)
		if !ok || kind != f.kind {
			continue
		}
		obj, exists, err := f.inf.GetStore().GetByKey(namespace + "/" + name)
		if err != nil || !exists {
			continue
		}
		m, ok := obj.(metav1.Object)
		if !ok || !f.isCandidate(obj) {
			continue
		}
		if !f.heldAlive(m) {
			out = append(out, obj)
		}
	}
	return out
}

// heldAlive reports whether the config object m has an owner that keeps it from the
// garbage collector: an owner of a kind the service adds (core.CollectorOwner) other
// than a ReplicaSet, or a ReplicaSet cached alive (same UID, not being deleted). One whose
// owners are all ReplicaSets gone or going (a Deployment's history limit deleting the
// one before at once, for a rollout of 0 replicas) is deleted with them whoever uses it:
// its first use is looked at too (docs/design.md, "The revision side").
func (f revisionFeed) heldAlive(m metav1.Object) bool {
	for _, r := range m.GetOwnerReferences() {
		if _, ok := core.CollectorOwner([]metav1.OwnerReference{r}); !ok {
			continue
		}
		if r.Kind != kindReplicaSet {
			return true
		}
		obj, exists, err := f.users.GetStore().GetByKey(m.GetNamespace() + "/" + r.Name)
		rs, ok := obj.(metav1.Object)
		if err == nil && exists && ok && rs.GetUID() == r.UID && rs.GetDeletionTimestamp() == nil {
			return true
		}
	}
	return false
}

// isCandidate reports whether the config object obj may be a revision the revision side
// should look at: candidate, or a cached workload lists it by name (Listed; an unlabelled
// object created after the ReplicaSet that lists it).
func (f revisionFeed) isCandidate(obj any) bool {
	m, ok := obj.(metav1.Object)
	if !ok {
		return false
	}
	return candidate(m) || (f.listed != nil && f.listed(f.kind, m.GetNamespace(), m.GetName()))
}

// revisionNeedsLook reports whether an update of a config object may leave it short of
// owners: it lost one (a PUT without ownerReferences: kubectl replace, Argo CD
// Replace=true), was replaced by a namesake, or its labels or annotations changed
// (opted in). Data edits and the service's own owner additions are skipped.
func revisionNeedsLook(old, obj any) bool {
	o, ok1 := old.(metav1.Object)
	n, ok2 := obj.(metav1.Object)
	if !ok1 || !ok2 {
		return true
	}
	if o.GetUID() != n.GetUID() || !maps.Equal(o.GetLabels(), n.GetLabels()) || !maps.Equal(o.GetAnnotations(), n.GetAnnotations()) {
		return true
	}
	kept := map[string]bool{}
	for _, r := range n.GetOwnerReferences() {
		kept[string(r.UID)] = true
	}
	for _, r := range o.GetOwnerReferences() {
		if !kept[string(r.UID)] {
			return true
		}
	}
	return false
}

// candidate reports whether a config object may be a revision by its own metadata: it
// carries the opt-in label, a ReplicaSet owned it (it was attached, for example listed
// by a workload annotation, and may have lost owners since), or it has an owner of any
// kind the service adds (core.CollectorOwner: once owned, every live user is attached
// too). Other ConfigMaps and Secrets (kube-root-ca.crt, application config) are never
// queued, so they cost nothing and count nowhere.
func candidate(m metav1.Object) bool {
	if m.GetLabels()[core.LabelRevision] == "true" {
		return true
	}
	if _, held := core.CollectorOwner(m.GetOwnerReferences()); held {
		return true
	}
	for _, r := range m.GetOwnerReferences() {
		if r.Kind == kindReplicaSet {
			return true
		}
	}
	return false
}
