package inspect

import (
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
)

// Build derives a namespace's status from its snapshot and plan (pure). others are the
// namespace's config objects outside the plan (listOthers; nil: unknown), for the
// adoption hints; secrets says whether Secrets were listed.
func Build(snap *gc.Snapshot, plan *gc.Plan, others []gc.Revision, secrets bool) Report {
	rep := Report{Namespace: snap.Namespace, Workloads: []WorkloadStatus{}, Unattached: []PlanItem{}, Orphaned: []PlanItem{}}
	b := newBuilder(snap, plan, others)
	for i := range snap.Workloads {
		b.add(&snap.Workloads[i])
	}
	adoption(&rep, snap, others, b.byName, secrets, b.groupForAdoption)
	rep.Workloads = append(rep.Workloads, b.workloads()...)
	rep.Unprotected = unprotected(snap.Revisions, others)
	for _, it := range plan.Items {
		switch {
		case it.Decision == gc.Repair || (len(it.ReferencedBy) > 0 && len(it.Owners) == 0):
			rep.Unattached = append(rep.Unattached, NewPlanItem(it, ""))
		case len(it.ReferencedBy) == 0 && len(it.Owners) == 0:
			rep.Orphaned = append(rep.Orphaned, NewPlanItem(it, ""))
		}
	}
	return rep
}

// builder groups a snapshot's workloads: a ReplicaSet (and its Pods) under the Rollout
// or Deployment that controls it, each with the revisions it owns and uses.
type builder struct {
	snap *gc.Snapshot
	// byName is the plan's items by "Kind/name".
	byName map[string]gc.Item
	// owners maps an owner's UID to the revisions it owns.
	owners map[types.UID][]RevisionRef
	// heldByName is set for "Kind/name" of others owned by name (safety rule 11).
	heldByName map[string]bool
	groups     map[string]*WorkloadStatus
	order      []string
}

func newBuilder(snap *gc.Snapshot, plan *gc.Plan, others []gc.Revision) *builder {
	b := &builder{snap: snap, byName: map[string]gc.Item{}, owners: map[types.UID][]RevisionRef{},
		heldByName: map[string]bool{}, groups: map[string]*WorkloadStatus{}}
	items := map[types.UID]gc.Item{}
	for _, it := range plan.Items {
		items[it.UID] = it
		b.byName[string(it.Kind)+"/"+it.Name] = it
	}
	for _, r := range snap.Revisions {
		it, ok := items[r.UID]
		if !ok {
			continue
		}
		for _, or := range r.OwnerReferences {
			b.owners[or.UID] = append(b.owners[or.UID], RevisionRef{Kind: r.Kind, Name: r.Name, Family: it.Family})
		}
	}
	for _, r := range others {
		b.heldByName[string(r.Kind)+"/"+r.Name] = ownedByName(r)
		for _, or := range r.OwnerReferences {
			if or.Kind == "ReplicaSet" {
				b.owners[or.UID] = append(b.owners[or.UID], RevisionRef{Kind: r.Kind, Name: r.Name, ByName: true})
			}
		}
	}
	return b
}

// groupOf is the "Kind/name" of the group w is shown in: a ReplicaSet or Pod under the
// Rollout or Deployment controlling it, anything else on its own.
func groupOf(w *gc.Workload) string {
	switch w.Kind {
	case core.RolloutKind, "Deployment":
	case "ReplicaSet", "Pod":
		if c := controllerOf(w.OwnerReferences); c != nil && (c.Kind == core.RolloutKind || c.Kind == "Deployment") {
			return c.Kind + "/" + c.Name
		}
	}
	return w.Kind + "/" + w.Name
}

// group returns the group kind/name, creating it.
func (b *builder) group(kind, name string) *WorkloadStatus {
	k := kind + "/" + name
	if g, ok := b.groups[k]; ok {
		return g
	}
	g := &WorkloadStatus{Kind: kind, Name: name}
	b.groups[k] = g
	b.order = append(b.order, k)
	return g
}

// add shows workload w in its group.
func (b *builder) add(w *gc.Workload) {
	switch w.Kind {
	case core.RolloutKind:
		g := b.group(w.Kind, w.Name)
		if w.WorkloadRef != nil {
			g.Via = w.WorkloadRef.Kind + "/" + w.WorkloadRef.Name
		}
	case "Deployment":
		b.group(w.Kind, w.Name)
	case "ReplicaSet":
		kind, name, _ := strings.Cut(groupOf(w), "/")
		g := b.group(kind, name)
		g.ReplicaSets = append(g.ReplicaSets, b.replicaSet(w))
	case "ControllerRevision":
		return // template history: it keeps revisions, it is not a workload to show
	case "Pod":
		if c := controllerOf(w.OwnerReferences); c != nil && c.Kind == "ReplicaSet" {
			return // folded under its ReplicaSet (ready/desired)
		}
		b.addUser(w)
	default:
		b.addUser(w)
	}
}

// replicaSet is ReplicaSet w with the revisions it owns and those it uses unattached.
func (b *builder) replicaSet(w *gc.Workload) ReplicaSetStatus {
	rs := ReplicaSetStatus{Name: w.Name, UID: w.UID, Revision: w.Revision, PodHash: w.PodHash, Replicas: w.Replicas,
		ReadyReplicas: w.ReadyReplicas, Created: w.Created, Owns: b.owners[w.UID]}
	if rs.Owns == nil {
		rs.Owns = []RevisionRef{}
	}
	for _, ref := range w.Refs {
		it, ok := b.byName[string(ref.Kind)+"/"+ref.Name]
		if containsRev(rs.Owns, ref.Kind, ref.Name) {
			continue
		}
		if ok {
			rs.Unattached = append(rs.Unattached, RevisionRef{Kind: ref.Kind, Name: ref.Name, Family: it.Family})
		} else if b.heldByName[string(ref.Kind)+"/"+ref.Name] {
			// owned by others, so collected with them: the service attaches it (rule 11)
			rs.Unattached = append(rs.Unattached, RevisionRef{Kind: ref.Kind, Name: ref.Name, ByName: true})
		}
	}
	return rs
}

// addUser shows a workload without ReplicaSets (StatefulSet, DaemonSet, Job, CronJob, a
// bare Pod) when it uses or owns revisions.
func (b *builder) addUser(w *gc.Workload) {
	var uses []RevisionRef
	for _, ref := range w.Refs {
		if it, ok := b.byName[string(ref.Kind)+"/"+ref.Name]; ok {
			uses = append(uses, RevisionRef{Kind: ref.Kind, Name: ref.Name, Family: it.Family})
		}
	}
	if len(uses) > 0 || len(b.owners[w.UID]) > 0 {
		g := b.group(w.Kind, w.Name)
		g.Uses = append(uses, b.owners[w.UID]...)
	}
}

// groupForAdoption returns (creating it) the group a workload's adoption hints are shown
// in: a Pod of a ReplicaSet in its ReplicaSet's.
func (b *builder) groupForAdoption(w *gc.Workload) *WorkloadStatus {
	if c := controllerOf(w.OwnerReferences); w.Kind == "Pod" && c != nil && c.Kind == "ReplicaSet" {
		for i := range b.snap.Workloads { // the ReplicaSet's group
			if rs := &b.snap.Workloads[i]; rs.Kind == "ReplicaSet" && rs.UID == c.UID {
				w = rs
			}
		}
	}
	kind, name, _ := strings.Cut(groupOf(w), "/")
	return b.group(kind, name)
}

// workloads are the groups in name order, each one's ReplicaSets newest first.
func (b *builder) workloads() []WorkloadStatus {
	var out []WorkloadStatus
	sort.Strings(b.order)
	for _, k := range b.order {
		g := b.groups[k]
		sort.Slice(g.ReplicaSets, func(i, j int) bool { return newerReplicaSet(g.ReplicaSets[i], g.ReplicaSets[j]) })
		out = append(out, *g)
	}
	return out
}

// newerReplicaSet orders ReplicaSets by revision, then creation, newest first; then by name.
func newerReplicaSet(a, b ReplicaSetStatus) bool {
	ra, ea := strconv.Atoi(a.Revision)
	rb, eb := strconv.Atoi(b.Revision)
	if ea == nil && eb == nil && ra != rb {
		return ra > rb
	}
	if !a.Created.Equal(b.Created) {
		return a.Created.After(b.Created)
	}
	return a.Name < b.Name
}

func controllerOf(refs []metav1.OwnerReference) *metav1.OwnerReference {
	for i := range refs {
		if refs[i].Controller != nil && *refs[i].Controller {
			return &refs[i]
		}
	}
	return nil
}

func containsRev(rs []RevisionRef, kind core.Kind, name string) bool {
	for _, r := range rs {
		if r.Kind == kind && r.Name == name {
			return true
		}
	}
	return false
}
