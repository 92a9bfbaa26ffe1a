package gc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Outcome is what the executor did with one plan item.
type Outcome string

// Outcomes of Report.Results.
const (
	OutcomeDeleted     Outcome = "deleted"
	OutcomeWouldDelete Outcome = "would-delete"
	// OutcomeChanged: the precondition (UID, resourceVersion) failed: the object changed
	// since it was planned; it is decided again next sweep.
	OutcomeChanged Outcome = "changed"
	// OutcomeGone: the object was already deleted.
	OutcomeGone        Outcome = "gone"
	OutcomeRepaired    Outcome = "repaired"
	OutcomeWouldRepair Outcome = "would-repair"
	OutcomeKept        Outcome = "kept"
	OutcomeError       Outcome = "error"
)

// ItemResult is one plan item with what was done.
type ItemResult struct {
	Item
	Outcome Outcome `json:"outcome"`
	Error   string  `json:"error,omitempty"`
}

// Report is the result of executing one Plan.
type Report struct {
	Cluster   string       `json:"cluster,omitempty"`
	Namespace string       `json:"namespace"`
	DryRun    bool         `json:"dryRun"`
	Plan      *Plan        `json:"-"`
	Results   []ItemResult `json:"results"`
}

// Count returns how many results ended with outcome o.
func (r *Report) Count(o Outcome) int {
	n := 0
	for _, it := range r.Results {
		if it.Outcome == o {
			n++
		}
	}
	return n
}

// Executor carries out plans in one cluster.
type Executor struct {
	// Cluster names the cluster in metrics, logs and reports.
	Cluster string
	// Client deletes (required unless every call is a dry run), and confirms each
	// candidate's owners live before its delete.
	Client kubernetes.Interface
	// Metadata, when set, confirms each candidate live before its delete with a
	// metadata-only GET (else Client's GET, which transfers the data too).
	Metadata metadata.Interface
	// Attacher repairs referenced but unattached revisions; nil reports them only.
	Attacher *core.Attacher
	// AllowSecrets lets repairs attach Secrets (the Attacher must allow them too).
	AllowSecrets bool
	// Recorder, when set, receives a Normal event "Collected" per deletion.
	Recorder core.Recorder
	// Metrics, when set, counts deletions, skips and repairs.
	Metrics *Metrics
	// Logger receives one line per action; nil means slog.Default().
	Logger *slog.Logger
	// ServerDryRun sends every delete with dryRun=All (kubectl's --dry-run=server): the
	// apiserver checks the preconditions and permissions and persists nothing; deletes
	// that would succeed are reported as would-delete and repairs as would-repair.
	ServerDryRun bool
	// Parallel bounds the deletes in flight at once; zero means DefaultParallel, one
	// deletes one at a time. Every delete still goes through Client, so the client's
	// QPS limiter paces them all (a client at 50 QPS deletes at most 50 per second
	// whatever Parallel says); Parallel only stops round trips from adding up in series.
	Parallel int
}

// DefaultParallel is Executor.Parallel's default: enough deletes in flight to hide the
// round trip at a few hundred QPS, few enough not to flood one apiserver.
const DefaultParallel = 16

// Execute deletes every Delete item of p with metav1.Preconditions{UID,
// ResourceVersion} and attaches every Repair item to its ReplicaSets through the
// Attacher. With dryRun nothing is written: deletes are reported as would-delete and
// repairs as would-repair, so a dry run lists exactly what a real run of the same plan
// deletes. A failed precondition is OutcomeChanged and a missing object OutcomeGone;
// neither is an error. The error wraps core.ErrUnavailable when some write failed
// transiently, and is nil when every item ended without OutcomeError.
func (e *Executor) Execute(ctx context.Context, p *Plan, dryRun bool) (*Report, error) {
	return e.execute(ctx, p, dryRun, nil)
}

// execute is Execute; with f, no delete is sent on a plan older than f.maxAge (see
// freshness).
func (e *Executor) execute(ctx context.Context, p *Plan, dryRun bool, f *freshness) (*Report, error) {
	log := e.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("namespace", p.Namespace) // the cluster: NewSweeper's logger names it
	rep := &Report{Cluster: e.Cluster, Namespace: p.Namespace, DryRun: dryRun, Plan: p, Results: make([]ItemResult, len(p.Items))}
	repairs := map[types.UID]*repairTarget{}
	var deletes []int
	for i, it := range p.Items {
		res := ItemResult{Item: it, Outcome: OutcomeKept}
		switch it.Decision {
		case Delete:
			if dryRun {
				res.Outcome = OutcomeWouldDelete
				break
			}
			deletes = append(deletes, i)
		case Repair:
			res.Outcome = OutcomeWouldRepair
			if dryRun || e.ServerDryRun || e.Attacher == nil {
				break
			}
			for _, rs := range it.Repair {
				t := repairs[rs.UID]
				if t == nil {
					t = &repairTarget{rs: rs}
					repairs[rs.UID] = t
				}
				t.items = append(t.items, i)
				t.secrets = t.secrets || it.Kind == core.KindSecret
			}
		}
		rep.Results[i] = res
	}
	e.deleteAll(ctx, log, p, deletes, rep.Results, f)
	// Failures are listed in plan order whatever order the deletes finished in.
	var failures []string
	transient := false
	for _, i := range deletes {
		if r := rep.Results[i]; r.Outcome == OutcomeError {
			failures = append(failures, fmt.Sprintf("%s %s: %s", r.Kind, r.Name, r.Error))
			transient = true
		}
	}
	targets := make([]*repairTarget, 0, len(repairs))
	for _, t := range repairs {
		targets = append(targets, t)
	}
	sort.Slice(targets, func(i, j int) bool { return targets[i].rs.Name < targets[j].rs.Name })
	for _, t := range targets {
		if err := e.repair(ctx, log, p.Namespace, t, rep); err != nil {
			failures = append(failures, err.Error())
			transient = transient || errors.Is(err, core.ErrUnavailable)
		}
	}
	if len(failures) == 0 {
		return rep, nil
	}
	err := fmt.Errorf("gc %s: %d failure(s): %s", p.Namespace, len(failures), strings.Join(failures, "; "))
	if transient {
		return rep, fmt.Errorf("%w: %w", core.ErrUnavailable, err)
	}
	return rep, err
}

// deleteAll deletes the plan items at indexes idx of p, at most Parallel at once, and
// writes each outcome into results at the item's own index, so the report's order is the
// plan's whatever order the deletes finish in. Once ctx ends no further delete is sent:
// the items not yet started end as OutcomeError with ctx's error (as a delete sent with
// a dead context would), and deleteAll returns when the deletes in flight have returned.
// With f, each delete first asks f whether a plan young enough still deletes it.
func (e *Executor) deleteAll(ctx context.Context, log *slog.Logger, p *Plan, idx []int, results []ItemResult, f *freshness) {
	n := min(e.parallel(), len(idx))
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1)) - 1
				if k >= len(idx) {
					return
				}
				r := &results[idx[k]]
				if err := ctx.Err(); err != nil {
					r.Outcome, r.Error = OutcomeError, "not sent: "+context.Cause(ctx).Error()
					e.count(e.Metrics.skipped(e.Cluster, "error"))
					continue
				}
				if f != nil && !e.fresh(ctx, log, f, r) {
					continue
				}
				r.Outcome, r.Error = e.delete(ctx, log, p, r.Item)
			}
		}()
	}
	wg.Wait()
}

// freshness bounds the age of the plan a delete rests on (docs/design.md, "The sweep
// from the caches"): deletes are paced by the client's QPS, so the last delete of a
// namespace with many orphans would otherwise rest on a listing minutes old, blind to
// every Pod, Job or workload created since that uses its revision.
type freshness struct {
	maxAge time.Duration
	// replan lists the namespace live again and plans it.
	replan func(ctx context.Context) (*Plan, error)

	mu sync.Mutex
	// at is when the current plan's live listing began; agreed holds what that plan
	// deletes (nil: the plan the Executor was given); err is why planning again failed.
	at     time.Time
	agreed map[planKey]bool
	err    error
}

// fresh reports whether the delete of r may go out: the plan it rests on is at most
// f.maxAge old (else it is taken again, once for every worker waiting) and deletes r
// too (same UID and resourceVersion), as Confirm requires of two plans. Otherwise r
// ends kept (or in error when the plan could not be read) and fresh is false.
func (e *Executor) fresh(ctx context.Context, log *slog.Logger, f *freshness, r *ItemResult) bool {
	f.mu.Lock()
	if f.err == nil && time.Since(f.at) > f.maxAge {
		at := time.Now()
		if p, err := f.replan(ctx); err != nil {
			f.err = err
		} else {
			f.at, f.agreed = at, deleteKeys(p)
		}
	}
	err, agreed := f.err, f.agreed == nil || f.agreed[planKey{r.UID, r.ResourceVersion}]
	f.mu.Unlock()
	switch {
	case err != nil:
		r.Outcome, r.Error = OutcomeError, "not sent: planning again before the delete: "+err.Error()
		e.count(e.Metrics.skipped(e.Cluster, "error"))
		return false
	case !agreed:
		r.Decision, r.Outcome = Keep, OutcomeKept
		r.Reason = "changed since the plan (planned again before its delete); decided again next sweep"
		log.Info("revision not deleted: a fresh plan before its delete keeps it", "kind", r.Kind, "name", r.Name)
		e.count(e.Metrics.skipped(e.Cluster, "changed"))
		return false
	}
	return true
}

func (e *Executor) parallel() int {
	if e.Parallel <= 0 {
		return DefaultParallel
	}
	return e.Parallel
}

type repairTarget struct {
	rs      ReplicaSetRef
	items   []int
	secrets bool
}

func (e *Executor) delete(ctx context.Context, log *slog.Logger, p *Plan, it Item) (Outcome, string) {
	if o, why, ok := e.confirm(ctx, p.Namespace, it); !ok {
		log.Info("revision not deleted: the live read before the delete disagrees with the plan", "kind", it.Kind, "name", it.Name, "outcome", o, "reason", why)
		e.count(e.Metrics.skipped(e.Cluster, string(o)))
		return o, why
	}
	uid, rv := it.UID, it.ResourceVersion
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}
	if e.ServerDryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var err error
	if it.Kind == core.KindSecret {
		err = e.Client.CoreV1().Secrets(p.Namespace).Delete(ctx, it.Name, opts)
	} else {
		err = e.Client.CoreV1().ConfigMaps(p.Namespace).Delete(ctx, it.Name, opts)
	}
	switch {
	case err == nil && e.ServerDryRun:
		return OutcomeWouldDelete, ""
	case err == nil:
		log.Info("collected orphan revision", "kind", it.Kind, "name", it.Name, "uid", it.UID, "family", it.Family, "reason", it.Reason)
		e.count(e.Metrics.deleted(e.Cluster, string(it.Kind)))
		e.record(p.Namespace, it)
		return OutcomeDeleted, ""
	case apierrors.IsConflict(err):
		log.Info("revision changed since it was planned; kept, decided again next sweep", "kind", it.Kind, "name", it.Name, "error", err)
		e.count(e.Metrics.skipped(e.Cluster, "changed"))
		return OutcomeChanged, err.Error()
	case apierrors.IsNotFound(err):
		e.count(e.Metrics.skipped(e.Cluster, "gone"))
		return OutcomeGone, ""
	}
	log.Warn("deleting revision failed", "kind", it.Kind, "name", it.Name, "error", err)
	e.count(e.Metrics.skipped(e.Cluster, "error"))
	return OutcomeError, err.Error()
}

func (e *Executor) repair(ctx context.Context, log *slog.Logger, ns string, t *repairTarget, rep *Report) error {
	opts := core.DefaultOptions()
	opts.IncludeSecrets = t.secrets && e.AllowSecrets
	res, err := e.Attacher.Attach(ctx, core.Event{Cluster: e.Cluster, Namespace: ns, Name: t.rs.Name, UID: t.rs.UID, Options: opts})
	outcome := map[string]core.ObjectResult{}
	for _, o := range res.Objects {
		outcome[string(o.Kind)+"/"+o.Name] = o
	}
	for _, i := range t.items {
		r := &rep.Results[i]
		o, ok := outcome[string(r.Kind)+"/"+r.Name]
		switch {
		case ok && (o.Outcome == core.OutcomeAttached || o.Outcome == core.OutcomeAlreadyAttached):
			if r.Outcome != OutcomeError {
				r.Outcome = OutcomeRepaired
			}
			if o.Outcome == core.OutcomeAttached {
				e.count(e.Metrics.repaired(e.Cluster))
				log.Info("repaired: attached referenced revision", "kind", r.Kind, "name", r.Name, "replicaSet", t.rs.Name)
			}
		case err != nil:
			r.Outcome, r.Error = OutcomeError, "attaching to ReplicaSet "+t.rs.Name+": "+err.Error()
		case ok:
			r.Outcome, r.Error = OutcomeKept, "attaching to ReplicaSet "+t.rs.Name+": "+string(o.Outcome)+" "+o.Reason
		default:
			r.Outcome, r.Error = OutcomeKept, "attaching to ReplicaSet "+t.rs.Name+": not considered ("+res.Summary()+")"
		}
	}
	if err != nil && !errors.Is(err, core.ErrRefused) {
		return fmt.Errorf("repair via ReplicaSet %s: %w", t.rs.Name, err)
	}
	return nil
}

func (e *Executor) count(f func()) { f() }

func (e *Executor) record(ns string, it Item) {
	if e.Recorder == nil {
		return
	}
	om := metav1.ObjectMeta{Name: it.Name, Namespace: ns, UID: it.UID, ResourceVersion: it.ResourceVersion}
	var obj runtime.Object = &corev1.ConfigMap{ObjectMeta: om}
	if it.Kind == core.KindSecret {
		obj = &corev1.Secret{ObjectMeta: om}
	}
	e.Recorder.Eventf(obj, corev1.EventTypeNormal, "Collected", "Deleted orphaned config revision (family %q): %s", it.Family, it.Reason)
}

func (m *Metrics) deleted(cluster, kind string) func() {
	return func() {
		if m != nil {
			m.Deleted.WithLabelValues(cluster, kind).Inc()
		}
	}
}

func (m *Metrics) skipped(cluster, reason string) func() {
	return func() {
		if m != nil {
			m.Skipped.WithLabelValues(cluster, reason).Inc()
		}
	}
}

func (m *Metrics) repaired(cluster string) func() {
	return func() {
		if m != nil {
			m.Repaired.WithLabelValues(cluster).Inc()
		}
	}
}
