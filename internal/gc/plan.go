package gc

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Defaults of Options; the reasons are in the package documentation ("Defaults").
const (
	DefaultMinAge   = time.Hour
	DefaultKeep     = 2
	DefaultInterval = 10 * time.Minute
)

// Options are the planner's knobs.
type Options struct {
	// MinAge is the grace period: a revision younger than this is kept (--gc-min-age).
	MinAge time.Duration
	// Keep is how many of the newest unreferenced revisions of each family are kept
	// (--gc-keep).
	Keep int
	// Now is the planner's clock; zero means time.Now() at PlanNamespace.
	Now time.Time
}

// DefaultOptions returns MinAge DefaultMinAge and Keep DefaultKeep.
func DefaultOptions() Options { return Options{MinAge: DefaultMinAge, Keep: DefaultKeep} }

// Validate returns a *core.FieldError (core.ErrInvalid) for a negative MinAge or Keep.
func (o Options) Validate() error {
	if o.MinAge < 0 {
		return core.Invalidf("gc-min-age", "must not be negative, got %s", o.MinAge)
	}
	if o.Keep < 0 {
		return core.Invalidf("gc-keep", "must not be negative, got %d", o.Keep)
	}
	return nil
}

// Decision is what the plan does with one revision.
type Decision string

// Decisions.
const (
	// Delete: an orphan under every clause of safety rule 7.
	Delete Decision = "delete"
	// Keep: some clause keeps it (see Item.Reason).
	Keep Decision = "keep"
	// Repair: referenced by live ReplicaSets that do not own it; attach it to them.
	Repair Decision = "repair"
)

// Duration marshals as a Go duration string ("1h0m0s").
type Duration time.Duration

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// ReplicaSetRef names a ReplicaSet by name and UID.
type ReplicaSetRef struct {
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
}

// Item is the plan for one revision.
type Item struct {
	Namespace       string    `json:"namespace"`
	Kind            core.Kind `json:"kind"`
	Name            string    `json:"name"`
	UID             types.UID `json:"uid"`
	ResourceVersion string    `json:"resourceVersion"`
	Family          string    `json:"family"`
	Created         time.Time `json:"created"`
	Age             Duration  `json:"age"`
	Decision        Decision  `json:"decision"`
	Reason          string    `json:"reason"`
	// ReferencedBy lists the objects that reference it, as "Kind/name".
	ReferencedBy []string `json:"referencedBy,omitempty"`
	// Owners lists its live owners, as "Kind/name".
	Owners []string `json:"owners,omitempty"`
	// Rank is its place among the family's unreferenced revisions, newest = 1; 0 when
	// referenced or being deleted.
	Rank int `json:"rank,omitempty"`
	// Repair lists the live ReplicaSets that reference it without owning it (Decision Repair).
	Repair []ReplicaSetRef `json:"repair,omitempty"`
}

// Plan is the planner's output for one namespace: one Item per revision, sorted by
// kind, family and name.
type Plan struct {
	Namespace string    `json:"namespace"`
	Now       time.Time `json:"now"`
	MinAge    Duration  `json:"minAge"`
	Keep      int       `json:"keep"`
	Items     []Item    `json:"items"`
}

// Count returns the number of items with decision d.
func (p *Plan) Count(d Decision) int {
	n := 0
	for _, it := range p.Items {
		if it.Decision == d {
			n++
		}
	}
	return n
}

// Deletes returns the items to delete.
func (p *Plan) Deletes() []Item { return p.filter(Delete) }

// Repairs returns the items to repair.
func (p *Plan) Repairs() []Item { return p.filter(Repair) }

func (p *Plan) filter(d Decision) []Item {
	var out []Item
	for _, it := range p.Items {
		if it.Decision == d {
			out = append(out, it)
		}
	}
	return out
}

type objKey struct {
	kind core.Kind
	name string
}

// PlanNamespace decides, for every revision of s, whether to delete, keep or repair
// it, applying safety rule 7 of docs/design.md in the order the package documentation
// gives. It is a pure function of s and o (o.Now zero means time.Now()). The error is
// a core.ErrInvalid for bad options; s is not modified.
func PlanNamespace(s *Snapshot, o Options) (*Plan, error) {
	if s == nil {
		return nil, errors.New("gc: nil snapshot")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	p := &Plan{Namespace: s.Namespace, Now: now, MinAge: Duration(o.MinAge), Keep: o.Keep, Items: make([]Item, 0, len(s.Revisions))}
	idx := indexWorkloads(s)
	ws := rankRevisions(s, idx, now)
	for i := range ws {
		decide(&ws[i], o, now, idx.doubts)
		p.Items = append(p.Items, ws[i].item)
	}
	sort.Slice(p.Items, func(i, j int) bool {
		a, b := p.Items[i], p.Items[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		return a.Name < b.Name
	})
	return p, nil
}

// workloadIndex is what the plan needs to know of a namespace's workloads: each by UID,
// who references which revision, and the doubts that keep the whole namespace.
type workloadIndex struct {
	byUID  map[types.UID]*Workload
	refs   map[objKey][]*Workload
	doubts []string
}

func indexWorkloads(s *Snapshot) workloadIndex {
	idx := workloadIndex{byUID: map[types.UID]*Workload{}, refs: map[objKey][]*Workload{}}
	for i := range s.Workloads {
		w := &s.Workloads[i]
		idx.byUID[w.UID] = w
		seen := map[objKey]bool{}
		for _, r := range w.Refs {
			k := objKey{r.Kind, r.Name}
			if !seen[k] {
				seen[k] = true
				idx.refs[k] = append(idx.refs[k], w)
			}
		}
		if w.WorkloadRef != nil && !s.Listed[w.WorkloadRef.GroupKind()] {
			idx.doubts = append(idx.doubts, fmt.Sprintf("%s has spec.workloadRef to %s/%s, a kind that was not listed: its pod template is unknown",
				w, w.WorkloadRef.Kind, w.WorkloadRef.Name))
		}
	}
	sort.Strings(idx.doubts)
	return idx
}

// revisionWork is one revision being planned: its item and the workloads referencing it.
type revisionWork struct {
	rev   *Revision
	item  Item
	refBy []*Workload
}

// rankRevisions builds each revision's item and ranks the unreferenced ones newest first
// within their family. keep-N ranks each kind of a family apart: a ConfigMap and a Secret
// are never revisions of one config, however they are labelled.
func rankRevisions(s *Snapshot, idx workloadIndex, now time.Time) []revisionWork {
	ws := make([]revisionWork, len(s.Revisions))
	fams := map[objKey][]*revisionWork{}
	for i := range s.Revisions {
		r := &s.Revisions[i]
		it := Item{Namespace: s.Namespace, Kind: r.Kind, Name: r.Name, UID: r.UID, ResourceVersion: r.ResourceVersion,
			Created: r.Created, Age: Duration(now.Sub(r.Created)), Family: FamilyOf(r, idx.byUID)}
		refBy := idx.refs[objKey{r.Kind, r.Name}]
		for _, w := range refBy {
			it.ReferencedBy = append(it.ReferencedBy, w.String())
		}
		sort.Strings(it.ReferencedBy)
		for _, or := range r.OwnerReferences {
			if ownerLive(s, or) {
				it.Owners = append(it.Owners, or.Kind+"/"+or.Name)
			}
		}
		ws[i] = revisionWork{rev: r, item: it, refBy: refBy}
		if len(refBy) == 0 && !r.Deleting {
			k := objKey{r.Kind, it.Family}
			fams[k] = append(fams[k], &ws[i])
		}
	}
	for _, members := range fams {
		sort.Slice(members, func(i, j int) bool { return newer(members[i].rev, members[j].rev) })
		for i, m := range members {
			m.item.Rank = i + 1
		}
	}
	return ws
}

// decide sets the item's decision and reason: the first rule that keeps it wins; Delete
// only when none does.
func decide(w *revisionWork, o Options, now time.Time, doubts []string) {
	r, it := w.rev, &w.item
	it.Decision = Keep
	switch {
	case r.Labels[core.LabelRevision] != "true":
		it.Reason = "not opted in (no " + core.LabelRevision + "=true label)"
	case r.Deleting:
		it.Reason = "already being deleted"
	case r.Annotations[core.AnnotationSkip] == "true":
		it.Reason = "has " + core.AnnotationSkip + "=true"
	case len(w.refBy) > 0:
		it.Repair = repairTargets(r, w.refBy)
		if len(it.Repair) > 0 {
			names := make([]string, len(it.Repair))
			for j, rs := range it.Repair {
				names[j] = rs.Name
			}
			it.Decision = Repair
			it.Reason = "referenced but not attached: attach to ReplicaSet " + strings.Join(names, ", ")
		} else {
			it.Reason = "referenced by " + strings.Join(it.ReferencedBy, ", ")
		}
	case len(it.Owners) > 0:
		it.Reason = "owned by live " + strings.Join(it.Owners, ", ") + " (deleted with its owner by Kubernetes' garbage collector)"
	case now.Sub(r.Created) < o.MinAge:
		it.Reason = fmt.Sprintf("younger than the grace period (%s)", o.MinAge)
	case it.Rank <= o.Keep:
		it.Reason = fmt.Sprintf("newest unreferenced #%d of family %q (keep %d)", it.Rank, it.Family, o.Keep)
	case len(doubts) > 0:
		it.Reason = "namespace kept on doubt: " + doubts[0]
	default:
		it.Decision = Delete
		it.Reason = fmt.Sprintf("orphan: unreferenced, no live owner, older than %s, #%d of family %q (keep %d)", o.MinAge, it.Rank, it.Family, o.Keep)
	}
}

// newer orders revisions newest first: creation time descending, then name descending.
func newer(a, b *Revision) bool {
	if !a.Created.Equal(b.Created) {
		return a.Created.After(b.Created)
	}
	return a.Name > b.Name
}

// repairTargets lists the live ReplicaSets (not being deleted) that reference r
// without being among its owners.
func repairTargets(r *Revision, refBy []*Workload) []ReplicaSetRef {
	var out []ReplicaSetRef
	for _, w := range refBy {
		if w.GroupKind() != GKReplicaSet || w.Deleting {
			continue
		}
		owned := false
		for _, or := range r.OwnerReferences {
			if or.UID == w.UID {
				owned = true
				break
			}
		}
		if !owned {
			out = append(out, ReplicaSetRef{Name: w.Name, UID: w.UID})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ownerLive resolves an ownerReference by UID: an owner of a listed kind is live when
// its UID was listed; an owner of a kind that was not listed counts as live.
func ownerLive(s *Snapshot, or metav1.OwnerReference) bool {
	if !s.Listed[groupKind(or.APIVersion, or.Kind)] {
		return true
	}
	return s.Live[or.UID]
}

// FamilyOf returns r's family: its configmap-attacher.io/family label; else, for its
// first ReplicaSet owner, the name of that ReplicaSet's controller when the
// ReplicaSet is in byUID (a Rollout or Deployment) or the ReplicaSet's name without its
// pod-template-hash segment otherwise; else the name of its first owner of another
// kind; else its own name with StripHashSuffix applied.
func FamilyOf(r *Revision, byUID map[types.UID]*Workload) string {
	if f := r.Labels[core.LabelFamily]; f != "" {
		return f
	}
	for _, or := range r.OwnerReferences {
		if groupKind(or.APIVersion, or.Kind) != GKReplicaSet {
			continue
		}
		if w, ok := byUID[or.UID]; ok {
			for _, c := range w.OwnerReferences {
				if c.Controller != nil && *c.Controller {
					return c.Name
				}
			}
			return w.Name
		}
		if i := strings.LastIndexByte(or.Name, '-'); i > 0 {
			return or.Name[:i]
		}
		return or.Name
	}
	if len(r.OwnerReferences) > 0 {
		return r.OwnerReferences[0].Name
	}
	return StripHashSuffix(r.Name)
}

var (
	// kustomize's configMapGenerator: a 10-character hash from its safe alphabet.
	kustomizeHash = regexp.MustCompile(`^[bcdfghjklmnpqrstvwxz2456789]{10}$`)
	// Helm checksum names and hand-made suffixes: 5+ lowercase hex or alphanumerics with a digit.
	digitHash = regexp.MustCompile(`^[a-z0-9]{5,}$`)
	// hand-numbered revisions: "web-config-2", "web-config-v4".
	versionSuffix = regexp.MustCompile(`^v?[0-9]+$`)
)

// StripHashSuffix removes a trailing "-SUFFIX" that looks like a content hash or a
// version number, so that "app-config-7fh9k2c8tm" and "app-config-b4m2t7kg9h", or
// "app-config-1" and "app-config-v2", share the family "app-config". SUFFIX is a hash
// when it is 10 characters of kustomize's hash alphabet (bcdfghjklmnpqrstvwxz2456789),
// or at least 5 lowercase letters and digits with at least one digit (Helm-style
// checksums, "sha-1a2b3c"); a version when it is digits, optionally after a "v". Anything
// else ("app-config", "app-config-blue") is returned unchanged. Only one suffix is
// removed. The family only ranks unreferenced revisions for keep-N (docs/design.md).
func StripHashSuffix(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 || i == len(name)-1 {
		return name
	}
	suf := name[i+1:]
	if kustomizeHash.MatchString(suf) || versionSuffix.MatchString(suf) ||
		(digitHash.MatchString(suf) && strings.ContainsAny(suf, "0123456789")) {
		return name[:i]
	}
	return name
}

// Confirm combines the plan a real sweep acts on from two plans of the same namespace
// taken one after the other: it returns second with every Delete that first did not
// also decide (same UID and resourceVersion) turned into Keep, and every Repair kept.
// An object deleted only when both plans agree narrows the window in which a new
// reference can appear unseen (package documentation, "The residual race").
func Confirm(first, second *Plan) *Plan {
	agreed := deleteKeys(first)
	out := *second
	out.Items = make([]Item, len(second.Items))
	copy(out.Items, second.Items)
	for i := range out.Items {
		it := &out.Items[i]
		if it.Decision == Delete && !agreed[planKey{it.UID, it.ResourceVersion}] {
			it.Decision = Keep
			it.Reason = "changed between two plans; decided again next sweep"
		}
	}
	return &out
}

// planKey is a revision as a plan saw it.
type planKey struct {
	uid types.UID
	rv  string
}

// deleteKeys returns the revisions p deletes.
func deleteKeys(p *Plan) map[planKey]bool {
	out := map[planKey]bool{}
	for _, it := range p.Items {
		if it.Decision == Delete {
			out[planKey{it.UID, it.ResourceVersion}] = true
		}
	}
	return out
}
