package gc

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

var (
	propSeed  = flag.Uint64("gc.seed", 0, "seed of the planner property test (0: GC_PROPERTY_SEED, else time)")
	propCases = flag.Int("gc.cases", 0, "number of random namespaces (0: GC_PROPERTY_CASES, else 10000; 500 with -short)")
)

func propertyConfig(t *testing.T) (seed uint64, cases int) {
	seed = *propSeed
	if seed == 0 {
		if v := os.Getenv("GC_PROPERTY_SEED"); v != "" {
			s, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("GC_PROPERTY_SEED: %v", err)
			}
			seed = s
		}
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	cases = *propCases
	if cases == 0 {
		if v := os.Getenv("GC_PROPERTY_CASES"); v != "" {
			cases, _ = strconv.Atoi(v)
		}
	}
	if cases <= 0 {
		cases = 10000
		if testing.Short() {
			cases = 500
		}
	}
	return seed, cases
}

// TestPlanProperties checks safety rule 7 on random namespaces: every Delete satisfies
// each clause (checked here independently of the planner), every revision that
// satisfies every clause is deleted, referenced revisions are never deleted, and the
// plan does not depend on listing order. Reproduce a failure with
// GC_PROPERTY_SEED=<seed> (or -gc.seed) as printed.
func TestPlanProperties(t *testing.T) {
	seed, cases := propertyConfig(t)
	t.Logf("seed %d, %d cases (reproduce: GC_PROPERTY_SEED=%d go test ./internal/gc/ -run TestPlanProperties)", seed, cases, seed)
	var stats struct{ revisions, deletes, repairs, orphansOld, keptYoung, keptRank, keptOwner, keptRef, doubts int }
	for c := 0; c < cases; c++ {
		rng := rand.New(rand.NewPCG(seed, uint64(c)))
		s, o := randomNamespace(rng)
		p, err := PlanNamespace(s, o)
		if err != nil {
			t.Fatalf("seed %d case %d: %v", seed, c, err)
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d case %d (GC_PROPERTY_SEED=%d): %s\nsnapshot: %+v\noptions: %+v", seed, c, seed, fmt.Sprintf(format, args...), s, o)
		}
		if len(p.Items) != len(s.Revisions) {
			fail("%d items for %d revisions", len(p.Items), len(s.Revisions))
		}
		byName := map[objKey]Item{}
		for _, it := range p.Items {
			byName[objKey{it.Kind, it.Name}] = it
		}
		doubt := hasDoubt(s)
		if doubt {
			stats.doubts++
		}
		for i := range s.Revisions {
			r := &s.Revisions[i]
			it, ok := byName[objKey{r.Kind, r.Name}]
			if !ok {
				fail("no item for %s/%s", r.Kind, r.Name)
			}
			stats.revisions++
			clauses := oracle(s, o, r)
			orphan := len(clauses) == 0 && !doubt
			switch it.Decision {
			case Delete:
				stats.deletes++
				if len(clauses) > 0 {
					fail("deleted %s/%s although %v (plan reason %q)", r.Kind, r.Name, clauses, it.Reason)
				}
				if doubt {
					fail("deleted %s/%s in a namespace with doubt", r.Kind, r.Name)
				}
			case Repair:
				stats.repairs++
				if len(it.Repair) == 0 || !referencedByRS(s, r, it.Repair) {
					fail("repair of %s/%s names %v, not live referencing non-owner ReplicaSets", r.Kind, r.Name, it.Repair)
				}
			}
			if orphan {
				stats.orphansOld++
				if it.Decision != Delete {
					fail("true orphan %s/%s kept: %s", r.Kind, r.Name, it.Reason)
				}
			}
			if it.Decision == Keep {
				switch {
				case contains(clauses, "young"):
					stats.keptYoung++
				case contains(clauses, "rank"):
					stats.keptRank++
				case contains(clauses, "owner"):
					stats.keptOwner++
				case contains(clauses, "referenced"):
					stats.keptRef++
				}
			}
		}
		// Listing order must not matter.
		shuffled := *s
		shuffled.Revisions = append([]Revision(nil), s.Revisions...)
		shuffled.Workloads = append([]Workload(nil), s.Workloads...)
		rng.Shuffle(len(shuffled.Revisions), func(i, j int) {
			shuffled.Revisions[i], shuffled.Revisions[j] = shuffled.Revisions[j], shuffled.Revisions[i]
		})
		rng.Shuffle(len(shuffled.Workloads), func(i, j int) {
			shuffled.Workloads[i], shuffled.Workloads[j] = shuffled.Workloads[j], shuffled.Workloads[i]
		})
		p2, _ := PlanNamespace(&shuffled, o)
		if !reflect.DeepEqual(p.Items, p2.Items) {
			fail("plan depends on listing order")
		}
		// Confirm with itself changes nothing; a changed resourceVersion cancels a delete.
		if !reflect.DeepEqual(Confirm(p, p).Items, p.Items) {
			fail("Confirm(p, p) != p")
		}
		if del := p.Deletes(); len(del) > 0 {
			first := *p
			first.Items = append([]Item(nil), p.Items...)
			for i := range first.Items {
				if first.Items[i].UID == del[0].UID {
					first.Items[i].ResourceVersion += "x"
				}
			}
			for _, it := range Confirm(&first, p).Items {
				if it.UID == del[0].UID && it.Decision == Delete {
					fail("Confirm kept a delete whose resourceVersion changed")
				}
			}
		}
	}
	t.Logf("figures: %+v", stats)
	if stats.deletes == 0 || stats.orphansOld == 0 || stats.repairs == 0 || stats.keptYoung == 0 || stats.keptRank == 0 || stats.keptOwner == 0 {
		t.Errorf("generator too narrow, some decision never exercised: %+v", stats)
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// oracle returns the clauses of safety rule 7 that forbid deleting r, computed
// straight from the snapshot (only the family name comes from FamilyOf).
func oracle(s *Snapshot, o Options, r *Revision) []string {
	var out []string
	if r.Labels[core.LabelRevision] != "true" {
		out = append(out, "not-opted-in")
	}
	if r.Deleting {
		out = append(out, "deleting")
	}
	if r.Annotations[core.AnnotationSkip] == "true" {
		out = append(out, "skip")
	}
	if isReferenced(s, r) {
		out = append(out, "referenced")
	}
	for _, or := range r.OwnerReferences {
		gk := schema.FromAPIVersionAndKind(or.APIVersion, or.Kind).GroupKind()
		if !s.Listed[gk] || s.Live[or.UID] {
			out = append(out, "owner")
			break
		}
	}
	if o.Now.Sub(r.Created) < o.MinAge {
		out = append(out, "young")
	}
	byUID := map[types.UID]*Workload{}
	for i := range s.Workloads {
		byUID[s.Workloads[i].UID] = &s.Workloads[i]
	}
	fam := FamilyOf(r, byUID)
	newerCount := 0
	for i := range s.Revisions {
		x := &s.Revisions[i]
		if x == r || x.Kind != r.Kind || x.Deleting || isReferenced(s, x) || FamilyOf(x, byUID) != fam {
			continue
		}
		if x.Created.After(r.Created) || (x.Created.Equal(r.Created) && x.Name > r.Name) {
			newerCount++
		}
	}
	if newerCount < o.Keep {
		out = append(out, "rank")
	}
	return out
}

func isReferenced(s *Snapshot, r *Revision) bool {
	for _, w := range s.Workloads {
		for _, ref := range w.Refs {
			if ref.Kind == r.Kind && ref.Name == r.Name {
				return true
			}
		}
	}
	return false
}

func hasDoubt(s *Snapshot) bool {
	for _, w := range s.Workloads {
		if w.WorkloadRef != nil && !s.Listed[schema.FromAPIVersionAndKind(w.WorkloadRef.APIVersion, w.WorkloadRef.Kind).GroupKind()] {
			return true
		}
	}
	return false
}

func referencedByRS(s *Snapshot, r *Revision, rss []ReplicaSetRef) bool {
	for _, target := range rss {
		found := false
		for _, w := range s.Workloads {
			if w.UID != target.UID || w.Kind != "ReplicaSet" || w.Deleting {
				continue
			}
			for _, ref := range w.Refs {
				if ref.Kind == r.Kind && ref.Name == r.Name {
					found = true
				}
			}
		}
		for _, or := range r.OwnerReferences {
			if or.UID == target.UID {
				return false
			}
		}
		if !found {
			return false
		}
	}
	return true
}

var kindAPI = map[string]string{"ReplicaSet": "apps/v1", "Deployment": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1",
	"Job": "batch/v1", "CronJob": "batch/v1", "Pod": "v1", "Rollout": "argoproj.io/v1alpha1"}
var kinds = []string{"ReplicaSet", "ReplicaSet", "ReplicaSet", "Deployment", "Rollout", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod", "Pod"}

// randomNamespace builds a random but plausible namespace: revisions named after a few
// families (some labelled, some not), workloads referencing random names (existing or
// not), owners that are live, dangling, or of unlisted kinds.
func randomNamespace(rng *rand.Rand) (*Snapshot, Options) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	o := Options{MinAge: []time.Duration{0, 30 * time.Minute, time.Hour, 2 * time.Hour}[rng.IntN(4)], Keep: rng.IntN(4), Now: now}
	s := &Snapshot{Namespace: "ns", Listed: map[schema.GroupKind]bool{}, Live: map[types.UID]bool{}}
	for _, gk := range WorkloadKinds {
		if rng.IntN(12) != 0 { // sometimes a kind is not listed: its owners count as live
			s.Listed[gk] = true
		}
	}
	uid := 0
	newUID := func() types.UID { uid++; return types.UID(fmt.Sprintf("uid-%d", uid)) }
	families := []string{"app", "web", "db"}
	var names []objKey
	nRev := rng.IntN(12)
	for i := 0; i < nRev; i++ {
		k := core.KindConfigMap
		if rng.IntN(5) == 0 {
			k = core.KindSecret
		}
		fam := families[rng.IntN(len(families))]
		name := fmt.Sprintf("%s-config-%d%s", fam, i, "x7k2p")
		names = append(names, objKey{k, name})
	}
	nW := rng.IntN(8)
	for i := 0; i < nW; i++ {
		kind := kinds[rng.IntN(len(kinds))]
		w := Workload{APIVersion: kindAPI[kind], Kind: kind, Name: fmt.Sprintf("%s-%d", "web", i), UID: newUID(),
			Created: now.Add(-time.Duration(rng.IntN(180)) * time.Minute), Deleting: rng.IntN(15) == 0}
		for n := rng.IntN(3); n > 0 && len(names) > 0; n-- {
			ref := names[rng.IntN(len(names))]
			w.Refs = append(w.Refs, core.Ref{Kind: ref.kind, Name: ref.name})
		}
		if rng.IntN(10) == 0 {
			w.Refs = append(w.Refs, core.Ref{Kind: core.KindConfigMap, Name: "not-there"})
		}
		if kind == "Rollout" && rng.IntN(4) == 0 {
			w.WorkloadRef = &TargetRef{APIVersion: "apps/v1", Kind: "Deployment", Name: "web-0"}
			if rng.IntN(6) == 0 {
				w.WorkloadRef = &TargetRef{APIVersion: "example.com/v1", Kind: "Widget", Name: "w"}
			}
		}
		if kind == "ReplicaSet" && rng.IntN(2) == 0 {
			w.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: newUID(), Controller: ptr(true)}}
		}
		s.Workloads = append(s.Workloads, w)
		if s.Listed[w.GroupKind()] {
			s.Live[w.UID] = true
		}
	}
	for i, n := range names {
		r := Revision{Kind: n.kind, Name: n.name, UID: newUID(), ResourceVersion: strconv.Itoa(100 + i),
			Created:  now.Add(-time.Duration(rng.IntN(240)) * time.Minute),
			Deleting: rng.IntN(20) == 0, Labels: map[string]string{}, Annotations: map[string]string{}}
		if rng.IntN(10) != 0 {
			r.Labels[core.LabelRevision] = "true"
		}
		if rng.IntN(3) == 0 {
			r.Labels[core.LabelFamily] = families[rng.IntN(len(families))]
		}
		if rng.IntN(10) == 0 {
			r.Annotations[core.AnnotationSkip] = "true"
		}
		if rng.IntN(8) == 0 && i > 0 { // same creation time as a neighbour: tie broken by name
			r.Created = s.Revisions[i-1].Created
		}
		for n := rng.IntN(3); n > 0; n-- {
			switch rng.IntN(4) {
			case 0: // a workload in the snapshot (live if its kind is listed)
				if len(s.Workloads) > 0 {
					w := s.Workloads[rng.IntN(len(s.Workloads))]
					r.OwnerReferences = append(r.OwnerReferences, metav1.OwnerReference{APIVersion: w.APIVersion, Kind: w.Kind, Name: w.Name, UID: w.UID})
				}
			case 1, 2: // dangling UID of a ReplicaSet
				r.OwnerReferences = append(r.OwnerReferences, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d4c3b2a1", UID: newUID()})
			case 3: // a kind nobody lists
				r.OwnerReferences = append(r.OwnerReferences, metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Widget", Name: "w", UID: newUID()})
			}
		}
		s.Revisions = append(s.Revisions, r)
	}
	return s, o
}

func ptr[T any](v T) *T { return &v }
