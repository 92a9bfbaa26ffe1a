package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
)

// Event is the domain event every ingress path decodes into: "ReplicaSet
// Namespace/Name (UID) appeared in Cluster; attach its config revisions".
type Event struct {
	// Cluster is the registered cluster name; empty means the default cluster.
	Cluster string
	// Namespace and Name identify the ReplicaSet.
	Namespace string
	Name      string
	// UID is the ReplicaSet UID the event carried, if any. When set, the live
	// ReplicaSet must have this UID (safety rule 1).
	UID types.UID
	// Options are the per-event settings (trigger spec or CLI flags).
	Options Options
}

// Validate checks the event's identifiers without touching the cluster. It returns a
// *FieldError (ErrInvalid) naming the bad field.
func (e Event) Validate() error {
	if e.Namespace == "" {
		return Invalidf("namespace", "ReplicaSet namespace is required")
	}
	if errs := validation.IsDNS1123Label(e.Namespace); len(errs) > 0 {
		return Invalidf("namespace", "%q is not a valid namespace: %s", Clip(e.Namespace), strings.Join(errs, "; "))
	}
	if e.Name == "" {
		return Invalidf("name", "ReplicaSet name is required")
	}
	if errs := validation.IsDNS1123Subdomain(e.Name); len(errs) > 0 {
		return Invalidf("name", "%q is not a valid ReplicaSet name: %s", Clip(e.Name), strings.Join(errs, "; "))
	}
	if len(e.UID) > 128 {
		return Invalidf("uid", "UID is %d characters long, at most 128 are allowed", len(e.UID))
	}
	return nil
}

// Recorder records Kubernetes Events; record.EventRecorder satisfies it.
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Config configures an Attacher for one cluster.
type Config struct {
	// Cluster is the name reported in results and logs.
	Cluster string
	// Client performs writes and the live confirmation of the owner.
	Client kubernetes.Interface
	// Metadata, when set, performs the live reads and the PATCHes of ConfigMaps and
	// Secrets, answered as metadata only (PartialObjectMetadata): a Secret's data never
	// enters the service's memory (docs/design.md, "Per-cluster cost"). Nil: Client,
	// whose answers carry the data (one-shot paths and unit tests with fake clientsets).
	Metadata metadata.Interface
	// Reader serves reads; informer-backed in long-running paths, LiveReader otherwise.
	Reader Reader
	// Recorder, when set, receives an Event for every object changed.
	Recorder Recorder
	// BlockOwnerDeletion sets blockOwnerDeletion on added ownerReferences. It needs
	// permission to delete the owner's finalizers subresource, so it is off by default
	// (docs/design.md, safety rule 3).
	BlockOwnerDeletion bool
	// AllowSecrets lets events that set includeSecrets attach Secrets. Off by default:
	// Secrets are never touched unless enabled here and requested by the event.
	AllowSecrets bool
	// Namespaces restricts the namespaces events may act in; an event elsewhere is
	// refused (ErrRefused) before anything is read or written. Zero: every namespace.
	Namespaces NamespacePolicy
	// Logger receives structured logs; nil means slog.Default(). The Attacher adds
	// cluster=Cluster: pass a logger that does not name the cluster already.
	Logger *slog.Logger
	// Backoff bounds the retries of a conflicting write; zero means DefaultBackoff.
	Backoff wait.Backoff
	// Applications, when set, lets the service check the Argo CD Application of a
	// revision it attaches (appWarning); nil skips that check.
	Applications ApplicationReader
}

// DefaultBackoff is the retry schedule for conflicting writes: 30 tries, 10 ms growing by
// half each time up to 500 ms, with jitter so that competing writers fall out of step
// (about 12 s in all, under the trigger's 30 s execute timeout). A writer hammering the
// same ConfigMap makes conflicts frequent; the owner is still added, never by overwriting.
var DefaultBackoff = wait.Backoff{Steps: 30, Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 0.5, Cap: 500 * time.Millisecond}

// Attacher adds ReplicaSet ownerReferences to the config revisions they use, in one
// cluster. It is safe for concurrent use; work on one object is serialised.
type Attacher struct {
	cfg   Config
	log   *slog.Logger
	locks keyLocks
	// written: the latest writes, so a cache that has not seen one yet causes no
	// conflicting second PATCH.
	written recentWrites
}

// NewAttacher returns an Attacher for cfg. Client and Reader are required.
func NewAttacher(cfg Config) (*Attacher, error) {
	if cfg.Client == nil || cfg.Reader == nil {
		return nil, errors.New("core: Config.Client and Config.Reader are required")
	}
	if cfg.Backoff.Steps == 0 {
		cfg.Backoff = DefaultBackoff
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Attacher{cfg: cfg, log: log.With("cluster", cfg.Cluster)}, nil
}

// Cluster returns the cluster name this Attacher serves.
func (a *Attacher) Cluster() string { return a.cfg.Cluster }

// Attach resolves the live ReplicaSet of ev and adds it as an owner of every eligible
// ConfigMap (and, when enabled, Secret) it uses, together with every other live user
// of that object (Users.Owners: other ReplicaSets, the ControllerRevisions of
// StatefulSets and DaemonSets, Jobs, CronJobs, bare Pods), so that the garbage collector
// keeps it while anything uses it (docs/safety.md).
//
// The returned Result lists every object considered with its outcome. The error is nil
// when every object ended without OutcomeError. It wraps ErrInvalid or ErrRefused when
// the event itself is rejected (nothing changed), ErrUnavailable when the cluster could
// not be read or some write failed transiently (a retry may succeed; writes made before
// are idempotent), and ErrPermanent when the apiserver refused for good (see Result.err).
func (a *Attacher) Attach(ctx context.Context, ev Event) (Result, error) {
	res := Result{Cluster: a.cfg.Cluster, Namespace: ev.Namespace, ReplicaSet: ev.Name, DryRun: ev.Options.DryRun, Objects: []ObjectResult{}}
	if err := a.admit(&ev); err != nil {
		return res, err
	}
	rs, fresh, err := a.resolveReplicaSet(ctx, ev)
	if err != nil {
		return res, err
	}
	res.UID = rs.UID

	wl, notes, err := a.resolveWorkload(ctx, rs)
	if err != nil {
		return res, err
	}
	res.Workload = wl.ref
	res.Notes = wl.notes
	if reason := wl.skipReason(rs); reason != "" {
		res.Skipped = reason
		return res, nil
	}

	refs, extra := collectRefs(rs, wl, ev.Options)
	res.Objects = append(res.Objects, notes...)
	res.Objects = append(res.Objects, extra...)
	pending := a.plan(ctx, ev, rs, refs, &res)
	if len(pending) == 0 {
		return res, res.err()
	}
	if ev.Options.DryRun {
		for _, p := range pending {
			res.Objects[p.idx] = dryRunAttach(res.Objects[p.idx], p)
		}
		return res, res.err()
	}
	// Safety rule 2: confirm the owner live right before writing, even when it was read
	// live above: the plan (config metadata, users, possibly live reads) runs between
	// that read and the write. A revision owned only by a dead owner would be deleted by
	// the garbage collector at once.
	live, err := a.confirmLive(ctx, ev, rs)
	var replaced *replacedError
	if errors.As(err, &replaced) && ev.UID == "" && !fresh {
		// The event named no UID and the cache held an older namesake: plan again for
		// the live ReplicaSet (its UID from the apiserver), which is then read live.
		ev.UID = replaced.live.UID
		return a.Attach(ctx, ev)
	}
	if err != nil {
		for _, p := range pending {
			res.Objects[p.idx].Outcome = OutcomeSkipped
			res.Objects[p.idx].Reason = "not written: " + err.Error()
		}
		return res, err
	}
	confirmed := map[types.UID]bool{live.UID: true}
	for _, p := range pending {
		res.Objects[p.idx] = a.write(ctx, ev, live, p, confirmed)
	}
	if res.Writes() > 0 {
		a.warnRollbackWindow(rs.Namespace, wl)
	}
	return res, res.err()
}

// admit applies the checks that need no read: the event's identifiers, the namespace
// policy, the spec's namespace; and defaults the selector.
func (a *Attacher) admit(ev *Event) error {
	if err := ev.Validate(); err != nil {
		return err
	}
	if err := a.cfg.Namespaces.Check(ev.Namespace); err != nil {
		return err
	}
	if ev.Options.Namespace != "" && ev.Options.Namespace != ev.Namespace {
		return refusedf("ReplicaSet is in namespace %q, the trigger spec allows only %q", ev.Namespace, ev.Options.Namespace)
	}
	if ev.Options.Selector == nil {
		ev.Options.Selector = DefaultOptions().Selector
	}
	return nil
}

type pendingWrite struct {
	ref   refEntry
	meta  *metav1.PartialObjectMetadata
	idx   int
	want  []metav1.OwnerReference // the ReplicaSet, then the object's other users
	users []User                  // the other users, to confirm live before writing
	// reason says why an object that is neither opted in nor listed is written (heldReason).
	reason string
}

// plan evaluates every reference, appends its result to res and returns the objects
// that need a write: eligible and lacking the ReplicaSet or another user as an owner.
func (a *Attacher) plan(ctx context.Context, ev Event, rs *appsv1.ReplicaSet, refs []refEntry, res *Result) []pendingWrite {
	var pending []pendingWrite
	for _, ref := range refs {
		or, meta := a.evaluate(ctx, ev, rs, ref)
		if or.Outcome == "" {
			_, users, err := a.usersOf(ctx, ref.Kind, rs.Namespace, ref.Name, rs.UID)
			p := pendingWrite{ref: ref, meta: meta, idx: len(res.Objects), users: users, reason: or.Reason,
				want: append([]metav1.OwnerReference{a.ownerReference(rs)}, a.ownerRefs(users)...)}
			switch {
			case err != nil:
				or = or.failed("finding its other users", err)
			case len(missingOwners(meta.OwnerReferences, p.want)) == 0 && !needsPruneGuard(meta):
				or.Outcome, or.Reason = OutcomeAlreadyAttached, ""
			default:
				pending = append(pending, p)
			}
		}
		res.Objects = append(res.Objects, or)
	}
	return pending
}

// err summarises object errors: nil if none; wrapping ErrUnavailable if any is
// transient (a retry redoes it; the permanent ones are only named); else wrapping one
// *PermanentError per failed object (errors.Is ErrPermanent, errors.As *PermanentError).
func (r *Result) err() error {
	var msgs []string
	var permanent []error
	transient := false
	for _, o := range r.Objects {
		if o.Outcome != OutcomeError {
			continue
		}
		msgs = append(msgs, fmt.Sprintf("%s %s/%s: %s", o.Kind, r.Namespace, o.Name, o.Reason))
		if o.Transient {
			transient = true
			continue
		}
		cause := o.cause
		if cause == nil {
			cause = errors.New(o.Reason)
		}
		permanent = append(permanent, &PermanentError{Object: string(o.Kind) + " " + r.Namespace + "/" + o.Name, Cause: cause})
	}
	if len(msgs) == 0 {
		return nil
	}
	msg := fmt.Sprintf("%d object(s) failed: %s", len(msgs), strings.Join(msgs, "; "))
	if transient {
		return fmt.Errorf("%w: %s", ErrUnavailable, msg)
	}
	return &objectErrors{msg: fmt.Sprintf("%s: %s", ErrPermanent, msg), errs: permanent}
}

// objectErrors is the error of an Attach whose failed objects all failed permanently.
type objectErrors struct {
	msg  string
	errs []error
}

func (e *objectErrors) Error() string   { return e.msg }
func (e *objectErrors) Unwrap() []error { return e.errs }

// resolveReplicaSet applies safety rules 1 and 2 to the (possibly cached) ReplicaSet.
// fresh reports that it was read live here: the cache had not seen it (or held an older
// namesake of the event's UID) and did not deliver it within its wait (awaitOrGet). Either
// way the confirm still runs right before the write (docs/design.md, "The live confirm").
func (a *Attacher) resolveReplicaSet(ctx context.Context, ev Event) (rs *appsv1.ReplicaSet, fresh bool, err error) {
	if c, ok := a.cfg.Reader.(ReplicaSetCache); ok {
		rs, ok = c.CachedReplicaSet(ev.Namespace, ev.Name)
		if !ok || (ev.UID != "" && rs.UID != ev.UID) {
			// The event outran the cache, or the cache lags a delete-and-recreate.
			rs, fresh, err = a.awaitOrGet(ctx, ev)
		}
	} else {
		rs, err = a.cfg.Reader.ReplicaSet(ctx, ev.Namespace, ev.Name)
		if err == nil && ev.UID != "" && rs.UID != ev.UID {
			rs, fresh, err = a.getReplicaSet(ctx, ev) // ask the apiserver before refusing
		}
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, false, refusedf("ReplicaSet %s/%s does not exist (deleted, or never created)", ev.Namespace, ev.Name)
	case err != nil:
		return nil, false, apiFailure("reading", "ReplicaSet "+ev.Namespace+"/"+ev.Name, err)
	}
	return rs, fresh, checkOwner(ev, rs)
}

// awaitOrGet returns the event's ReplicaSet once the cache delivers it (a
// ReplicaSetAwaiter's bounded wait: the attach then plans as on a cache hit), else reads
// it live (fresh).
func (a *Attacher) awaitOrGet(ctx context.Context, ev Event) (*appsv1.ReplicaSet, bool, error) {
	if w, ok := a.cfg.Reader.(ReplicaSetAwaiter); ok {
		if rs, ok := w.AwaitReplicaSet(ctx, ev.Namespace, ev.Name, ev.UID); ok {
			return rs, false, nil
		}
	}
	return a.getReplicaSet(ctx, ev)
}

// getReplicaSet reads the event's ReplicaSet live.
func (a *Attacher) getReplicaSet(ctx context.Context, ev Event) (*appsv1.ReplicaSet, bool, error) {
	rs, err := a.cfg.Client.AppsV1().ReplicaSets(ev.Namespace).Get(ctx, ev.Name, metav1.GetOptions{})
	return rs, err == nil, err
}

// checkOwner refuses a ReplicaSet whose UID differs from the event's or that is being deleted.
func checkOwner(ev Event, rs *appsv1.ReplicaSet) error {
	if ev.UID != "" && rs.UID != ev.UID {
		return refusedf("UID mismatch: the event names ReplicaSet %s/%s with UID %q, the live one has UID %q", rs.Namespace, rs.Name, Clip(string(ev.UID)), rs.UID)
	}
	if rs.DeletionTimestamp != nil {
		return refusedf("ReplicaSet %s/%s is being deleted (deletionTimestamp %s)", rs.Namespace, rs.Name, rs.DeletionTimestamp.UTC().Format(time.RFC3339))
	}
	return nil
}

// replacedError is a confirm's refusal because another ReplicaSet of the same name is
// live than the one planned for; live is that one.
type replacedError struct {
	live *appsv1.ReplicaSet
	err  error
}

func (e *replacedError) Error() string { return e.err.Error() }
func (e *replacedError) Unwrap() error { return e.err }

func (a *Attacher) confirmLive(ctx context.Context, ev Event, cached *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	live, err := a.cfg.Client.AppsV1().ReplicaSets(cached.Namespace).Get(ctx, cached.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, refusedf("ReplicaSet %s/%s was deleted", cached.Namespace, cached.Name)
	case err != nil:
		return nil, apiFailure("confirming", "ReplicaSet "+cached.Namespace+"/"+cached.Name, err)
	}
	if live.UID != cached.UID {
		return nil, &replacedError{live: live,
			err: refusedf("ReplicaSet %s/%s was replaced (UID %s, now %s)", cached.Namespace, cached.Name, cached.UID, live.UID)}
	}
	return live, checkOwner(ev, live)
}

func (a *Attacher) ownerReference(rs *appsv1.ReplicaSet) metav1.OwnerReference {
	ref := metav1.OwnerReference{
		APIVersion: "apps/v1",
		Kind:       "ReplicaSet",
		Name:       rs.Name,
		UID:        rs.UID,
		Controller: ptrTo(false),
	}
	if a.cfg.BlockOwnerDeletion {
		ref.BlockOwnerDeletion = ptrTo(true)
	}
	return ref
}

func ptrTo[T any](v T) *T { return &v }

// workload is what the core knows of the ReplicaSet's controller.
type workload struct {
	ref *WorkloadRef
	// annotations of the workload and of the workload a Rollout's workloadRef names.
	annotations []map[string]string
	// rollout is the (cached, read-only) Rollout controlling the ReplicaSet, if any;
	// notes are what Result.Notes reports about it (RollbackWindowNote).
	rollout *unstructured.Unstructured
	notes   []string
}

func (w workload) skipReason(rs *appsv1.ReplicaSet) string {
	if rs.Annotations[AnnotationSkip] == "true" {
		return "ReplicaSet has " + AnnotationSkip + "=true"
	}
	if rs.Spec.Template.Annotations[AnnotationSkip] == "true" {
		return "pod template has " + AnnotationSkip + "=true"
	}
	for _, ann := range w.annotations {
		if ann[AnnotationSkip] == "true" {
			return "workload has " + AnnotationSkip + "=true"
		}
	}
	return ""
}

// resolveWorkload finds the ReplicaSet's controller: an Argo Rollout (and the
// workload its spec.workloadRef names) or a Deployment. A missing workload is not an
// error: its annotations simply do not apply.
func (a *Attacher) resolveWorkload(ctx context.Context, rs *appsv1.ReplicaSet) (workload, []ObjectResult, error) {
	var w workload
	ctrl := metav1.GetControllerOf(rs)
	if ctrl == nil {
		return w, nil, nil
	}
	w.ref = &WorkloadRef{APIVersion: ctrl.APIVersion, Kind: ctrl.Kind, Name: ctrl.Name}
	group := strings.SplitN(ctrl.APIVersion, "/", 2)[0]
	switch {
	case ctrl.Kind == RolloutKind && group == RolloutGroup:
		ro, err := a.cfg.Reader.Rollout(ctx, rs.Namespace, ctrl.Name)
		if apierrors.IsNotFound(err) {
			return w, nil, nil
		}
		if err != nil {
			return w, nil, apiFailure("reading", "Rollout "+rs.Namespace+"/"+ctrl.Name, err)
		}
		if ro.GetUID() != ctrl.UID {
			return w, nil, nil
		}
		w.annotations = append(w.annotations, ro.GetAnnotations())
		w.rollout = ro
		if n := RollbackWindowNote(ro); n != "" {
			w.notes = append(w.notes, n)
		}
		kind, _, _ := unstructured.NestedString(ro.Object, "spec", "workloadRef", "kind")
		name, _, _ := unstructured.NestedString(ro.Object, "spec", "workloadRef", "name")
		if kind == "Deployment" && name != "" {
			w.ref.Via = "Deployment/" + name
			d, err := a.cfg.Reader.Deployment(ctx, rs.Namespace, name)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return w, nil, apiFailure("reading", "Deployment "+rs.Namespace+"/"+name, err)
			default:
				w.annotations = append(w.annotations, d.Annotations)
			}
		}
	case ctrl.Kind == "Deployment" && group == "apps":
		d, err := a.cfg.Reader.Deployment(ctx, rs.Namespace, ctrl.Name)
		if apierrors.IsNotFound(err) {
			return w, nil, nil
		}
		if err != nil {
			return w, nil, apiFailure("reading", "Deployment "+rs.Namespace+"/"+ctrl.Name, err)
		}
		if d.UID == ctrl.UID {
			w.annotations = append(w.annotations, d.Annotations)
		}
	}
	return w, nil, nil
}

// collectRefs lists the objects to consider: the names the event lists (untrusted unless
// Options.TrustListedNames), the names annotations list (workload, ReplicaSet, pod
// template: trusted), then the pod template's own references: all of them when
// discovery is on, else only those of listed names (which marks them as used by the
// template). Unusable annotation entries become skipped results.
func collectRefs(rs *appsv1.ReplicaSet, w workload, o Options) ([]refEntry, []ObjectResult) {
	s := newRefSet()
	listed, from := fromEvent, "spec"
	if o.TrustListedNames {
		listed, from = fromTrusted, "command-line"
	}
	for _, n := range o.ConfigMaps {
		s.add(KindConfigMap, n, false, listed, from)
	}
	for _, n := range o.Secrets {
		s.add(KindSecret, n, false, listed, from)
	}
	annSources := append([]map[string]string{rs.Annotations, rs.Spec.Template.Annotations}, w.annotations...)
	bad := addAnnotationRefs(s, annSources)
	tmpl := newRefSet()
	addPodSpecRefs(tmpl, &rs.Spec.Template.Spec)
	for _, e := range tmpl.entries() {
		if o.Discover || s.has(e.Kind, e.Name) {
			for _, f := range e.From {
				s.add(e.Kind, e.Name, e.Optional, fromTemplate, f)
			}
		}
	}
	return s.entries(), bad
}

// addAnnotationRefs adds the names the configmap-attacher.io/configmaps and /secrets
// annotations list, and returns a skipped result for each unusable entry.
func addAnnotationRefs(s *refSet, annSources []map[string]string) []ObjectResult {
	var bad []ObjectResult
	for _, ann := range annSources {
		for _, pair := range []struct {
			key  string
			kind Kind
		}{{AnnotationConfigMaps, KindConfigMap}, {AnnotationSecrets, KindSecret}} {
			v, ok := ann[pair.key]
			if !ok {
				continue
			}
			for i, raw := range strings.Split(v, ",") {
				name := strings.TrimSpace(raw)
				if name == "" {
					continue
				}
				if i >= MaxListedNames {
					bad = append(bad, ObjectResult{Kind: pair.kind, Name: Clip(name), Outcome: OutcomeSkipped,
						Reason: fmt.Sprintf("annotation %s lists more than %d names", pair.key, MaxListedNames)})
					break
				}
				if err := ValidateName(name); err != nil {
					bad = append(bad, ObjectResult{Kind: pair.kind, Name: Clip(name), Outcome: OutcomeSkipped,
						Reason: "annotation " + pair.key + ": " + err.Error(), From: []string{"annotation"}})
					continue
				}
				s.add(pair.kind, name, false, fromAnnotation, "annotation")
			}
		}
	}
	return bad
}

// evaluate decides, from the (possibly cached) metadata, whether ref needs a write. It
// returns a result with an empty Outcome when a write is needed.
func (a *Attacher) evaluate(ctx context.Context, ev Event, rs *appsv1.ReplicaSet, ref refEntry) (ObjectResult, *metav1.PartialObjectMetadata) {
	or := ObjectResult{Kind: ref.Kind, Name: ref.Name, From: ref.From}
	if ref.Kind == KindSecret && !(ev.Options.IncludeSecrets && a.cfg.AllowSecrets) {
		or.Outcome, or.Reason = OutcomeSkipped, "Secrets are not enabled (needs includeSecrets in the event and Secrets allowed in the service)"
		return or, nil
	}
	meta, err := a.cfg.Reader.ObjectMeta(ctx, ref.Kind, rs.Namespace, ref.Name)
	switch {
	case apierrors.IsNotFound(err):
		or.Outcome, or.Reason = OutcomeMissing, "not found"
		if ref.Optional && !ref.Explicit && !ref.Listed {
			or.Outcome, or.Reason = OutcomeMissingOptional, "not found; the reference is optional"
		}
		return or, nil
	case err != nil:
		return or.failed("reading", err), nil
	}
	return a.eligibility(ev, rs, ref, meta, or), meta
}

// eligibility applies safety rules 4, 5 and 11 to the object's metadata. An object needs
// the opt-in label (and must match the selector) unless a trusted source lists it, or the
// event lists it and the pod template references it, or the pod template references it
// and it already has an owner of the kinds the service adds (CollectorOwner: once owned,
// protected while used; docs/safety.md). The last sets the result's Reason.
func (a *Attacher) eligibility(ev Event, rs *appsv1.ReplicaSet, ref refEntry, meta *metav1.PartialObjectMetadata, or ObjectResult) ObjectResult {
	listed := ref.Explicit || (ref.Listed && ref.template)
	optedIn := meta.Labels[LabelRevision] == "true" && ev.Options.Selector.Matches(labelSet(meta.Labels))
	held, isHeld := CollectorOwner(meta.OwnerReferences)
	switch {
	case meta.Namespace != "" && meta.Namespace != rs.Namespace:
		or.Outcome, or.Reason = OutcomeSkipped, "in another namespace"
	case meta.Annotations[AnnotationSkip] == "true" && isHeld:
		or.Outcome, or.Reason = OutcomeSkipped, heldSkipReason(held)
	case meta.Annotations[AnnotationSkip] == "true":
		or.Outcome, or.Reason = OutcomeSkipped, "has "+AnnotationSkip+"=true"
	case meta.DeletionTimestamp != nil:
		or.Outcome, or.Reason = OutcomeSkipped, "is being deleted"
	case listed || optedIn:
	case ref.template && isHeld:
		or.Reason = heldReason(held) // eligible: the ReplicaSet's own template uses it
	case meta.Labels[LabelRevision] != "true":
		or.Outcome, or.Reason = OutcomeSkipped, "not opted in: no "+LabelRevision+"=true label"+notListedBecause(ref)
	default:
		or.Outcome, or.Reason = OutcomeSkipped, fmt.Sprintf("labels do not match the selector %q", ev.Options.Selector.String())+notListedBecause(ref)
	}
	return or
}

// notListedBecause completes a "not opted in" reason: why a listing did not count.
func notListedBecause(ref refEntry) string {
	if ref.Listed {
		return ", and the name comes only with the event: an event's names count only for objects the pod template references (or a workload annotation lists)"
	}
	return " and the name is not listed"
}

type labelSet map[string]string

func (l labelSet) Has(k string) bool   { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) {
	v, ok := l[k]
	return v, ok
}

func hasOwner(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// write adds the ReplicaSet rs and the object's other users, confirmed live (confirmed
// caches the answers of one Attach), as owners of p's object (addOwners).
func (a *Attacher) write(ctx context.Context, ev Event, rs *appsv1.ReplicaSet, p pendingWrite, confirmed map[types.UID]bool) ObjectResult {
	or := ObjectResult{Kind: p.ref.Kind, Name: p.ref.Name, From: p.ref.From, Reason: p.reason}
	want, err := a.confirmWanted(ctx, rs.Namespace, p, confirmed)
	if err != nil {
		return or.failed("confirming its other users", err)
	}
	recheck := func(m *metav1.PartialObjectMetadata) ObjectResult { return a.eligibility(ev, rs, p.ref, m, or) }
	or, added, uid := a.addOwners(ctx, rs.Namespace, or, p.meta, want, recheck)
	if or.Outcome == OutcomeAlreadyAttached {
		or.Reason = ""
	}
	if len(added) > 0 {
		args := []any{"kind", p.ref.Kind, "namespace", rs.Namespace, "name", p.ref.Name,
			"replicaSet", rs.Name, "replicaSetUID", rs.UID, "owners", or.Owners}
		if or.Reason != "" {
			args = append(args, "reason", or.Reason)
		}
		a.log.Info("attached", args...)
		a.record(p.ref.Kind, rs.Namespace, p.ref.Name, uid, added)
		a.warn(p.ref.Kind, rs.Namespace, p.ref.Name, uid, or.Warnings, added)
	}
	return a.guardPrune(ctx, or, guardTarget{ns: rs.Namespace, meta: p.meta, owners: want, recheck: recheck})
}

// confirmWanted returns p.want without the users that are gone or being deleted
// (confirmUsers), reading each user at most once per Attach.
func (a *Attacher) confirmWanted(ctx context.Context, ns string, p pendingWrite, confirmed map[types.UID]bool) ([]metav1.OwnerReference, error) {
	var unknown []User
	for _, u := range p.users {
		if _, ok := confirmed[u.UID]; !ok {
			unknown = append(unknown, u)
		}
	}
	live, err := a.confirmUsers(ctx, ns, unknown)
	if err != nil {
		return nil, err
	}
	for _, u := range unknown {
		confirmed[u.UID] = false
	}
	for _, u := range live {
		confirmed[u.UID] = true
	}
	var want []metav1.OwnerReference
	for _, o := range p.want {
		if confirmed[o.UID] {
			want = append(want, o)
		}
	}
	return want, nil
}

func (a *Attacher) getMetaLive(ctx context.Context, kind Kind, ns, name string) (*metav1.PartialObjectMetadata, error) {
	if a.cfg.Metadata != nil {
		return a.cfg.Metadata.Resource(kind.GVR()).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	}
	if kind == KindSecret {
		s, err := a.cfg.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &metav1.PartialObjectMetadata{ObjectMeta: s.ObjectMeta}, nil
	}
	cm, err := a.cfg.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: cm.ObjectMeta}, nil
}

func (a *Attacher) patch(ctx context.Context, kind Kind, ns, name string, patch []byte) (*metav1.PartialObjectMetadata, error) {
	opts := metav1.PatchOptions{FieldManager: FieldManager}
	if a.cfg.Metadata != nil {
		m, err := a.cfg.Metadata.Resource(kind.GVR()).Namespace(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, opts)
		if err != nil {
			return nil, err
		}
		m.TypeMeta, m.ManagedFields = metav1.TypeMeta{}, nil
		return m, nil
	}
	var om metav1.ObjectMeta
	if kind == KindSecret {
		s, err := a.cfg.Client.CoreV1().Secrets(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, opts)
		if err != nil {
			return nil, err
		}
		om = s.ObjectMeta
	} else {
		cm, err := a.cfg.Client.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, opts)
		if err != nil {
			return nil, err
		}
		om = cm.ObjectMeta
	}
	om.ManagedFields = nil
	return &metav1.PartialObjectMetadata{ObjectMeta: om}, nil
}

// record emits an "Attached" Event on the config object for the owners added.
func (a *Attacher) record(kind Kind, ns, name string, uid types.UID, added []metav1.OwnerReference) {
	if a.cfg.Recorder == nil {
		return
	}
	om := metav1.ObjectMeta{Name: name, Namespace: ns, UID: uid}
	var obj runtime.Object = &corev1.ConfigMap{ObjectMeta: om}
	if kind == KindSecret {
		obj = &corev1.Secret{ObjectMeta: om}
	}
	if len(added) == 1 && added[0].Kind == "ReplicaSet" {
		a.cfg.Recorder.Eventf(obj, corev1.EventTypeNormal, "Attached",
			"Added ownerReference to ReplicaSet %s (uid %s): deleted by the garbage collector once no ReplicaSet uses it", added[0].Name, added[0].UID)
		return
	}
	a.cfg.Recorder.Eventf(obj, corev1.EventTypeNormal, "Attached",
		"Added ownerReferences to %s: deleted by the garbage collector once none of its users exists", describeOwners(added))
}
