package core

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// RevisionEvent is the revision-side domain event: "config object Kind Namespace/Name
// (UID) appeared, or lost ownerReferences, in Cluster: make every live user of it an
// owner". A revision-side reconcile (safety rule 9) decodes a ConfigMap or Secret
// change into it; AttachRevision handles it.
type RevisionEvent struct {
	// Cluster is the registered cluster name; empty means the default cluster.
	Cluster string
	// Kind is KindConfigMap or KindSecret.
	Kind      Kind
	Namespace string
	Name      string
	// UID, when set, must be the live object's UID (safety rule 1).
	UID types.UID
	// Options: Selector, IncludeSecrets, DryRun and Namespace apply; the listed names
	// do not (the object is named by the event itself).
	Options Options
}

// Validate checks the event's identifiers without touching the cluster; it returns a
// *FieldError (ErrInvalid) naming the bad field.
func (e RevisionEvent) Validate() error {
	if e.Kind != KindConfigMap && e.Kind != KindSecret {
		return Invalidf("kind", "%q is not %s or %s", Clip(string(e.Kind)), KindConfigMap, KindSecret)
	}
	if errs := validation.IsDNS1123Label(e.Namespace); len(errs) > 0 {
		return Invalidf("namespace", "%q is not a valid namespace: %s", Clip(e.Namespace), strings.Join(errs, "; "))
	}
	if err := ValidateName(e.Name); err != nil {
		return Invalidf("name", "%v", err)
	}
	if len(e.UID) > 128 {
		return Invalidf("uid", "UID is %d characters long, at most 128 are allowed", len(e.UID))
	}
	return nil
}

// AttachRevision makes every live user of the config object of ev an owner of it
// (Users.Owners, each confirmed live; other owners are kept), when the object may be
// attached at all: opted in (label and selector), listed by a user's annotation, or
// already owned by an owner of the kinds the service adds (CollectorOwner: once owned,
// protected while used); not skipped, not being deleted, Secrets only when enabled.
//
// The Result has Revision set and one ObjectResult: OutcomeAttached (Owners lists the
// owners added), OutcomeAlreadyAttached, OutcomeWouldAttach (dry run), OutcomeSkipped
// (with the reason; also when nothing uses it: that is the orphan sweep's business),
// OutcomeMissing (the object is gone: nothing to do) or OutcomeError. Errors as Attach.
func (a *Attacher) AttachRevision(ctx context.Context, ev RevisionEvent) (Result, error) {
	res := Result{Cluster: a.cfg.Cluster, Namespace: ev.Namespace, Revision: string(ev.Kind) + "/" + ev.Name,
		DryRun: ev.Options.DryRun, Objects: []ObjectResult{}}
	if err := a.admitRevision(&ev); err != nil {
		return res, err
	}
	or := ObjectResult{Kind: ev.Kind, Name: ev.Name}
	if ev.Kind == KindSecret && !(ev.Options.IncludeSecrets && a.cfg.AllowSecrets) {
		or.Outcome, or.Reason = OutcomeSkipped, "Secrets are not enabled (needs includeSecrets in the event and Secrets allowed in the service)"
		res.Objects = append(res.Objects, or)
		return res, nil
	}
	meta, err := a.revisionMeta(ctx, ev)
	if err != nil {
		if !apierrors.IsNotFound(err) {
			return res, err
		}
		or.Outcome, or.Reason = OutcomeMissing, "not found"
		res.Objects = append(res.Objects, or)
		return res, nil
	}
	res.Objects = append(res.Objects, a.attachRevision(ctx, ev, meta, or))
	return res, res.err()
}

func (a *Attacher) admitRevision(ev *RevisionEvent) error {
	if err := ev.Validate(); err != nil {
		return err
	}
	if err := a.cfg.Namespaces.Check(ev.Namespace); err != nil {
		return err
	}
	if ev.Options.Namespace != "" && ev.Options.Namespace != ev.Namespace {
		return refusedf("%s is in namespace %q, the trigger spec allows only %q", ev.Kind, ev.Namespace, ev.Options.Namespace)
	}
	if ev.Options.Selector == nil {
		ev.Options.Selector = DefaultOptions().Selector
	}
	return nil
}

// revisionMeta reads the object's metadata (the cache, then live when the event's UID
// differs: the cache may lag a replacement) and applies safety rule 1.
func (a *Attacher) revisionMeta(ctx context.Context, ev RevisionEvent) (*metav1.PartialObjectMetadata, error) {
	object := string(ev.Kind) + " " + ev.Namespace + "/" + ev.Name
	meta, err := a.cfg.Reader.ObjectMeta(ctx, ev.Kind, ev.Namespace, ev.Name)
	if err == nil && ev.UID != "" && meta.UID != ev.UID {
		meta, err = a.getMetaLive(ctx, ev.Kind, ev.Namespace, ev.Name)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, err
	case err != nil:
		return nil, apiFailure("reading", object, err)
	case ev.UID != "" && meta.UID != ev.UID:
		return nil, refusedf("UID mismatch: the event names %s with UID %q, the live one has UID %q", object, Clip(string(ev.UID)), meta.UID)
	}
	return meta, nil
}

// attachRevision finds the object's users and adds the missing ones as owners.
func (a *Attacher) attachRevision(ctx context.Context, ev RevisionEvent, meta *metav1.PartialObjectMetadata, or ObjectResult) ObjectResult {
	users, owners, err := a.usersOf(ctx, ev.Kind, ev.Namespace, ev.Name, "")
	if err != nil {
		return or.failed("finding its users", err)
	}
	recheck := func(m *metav1.PartialObjectMetadata) ObjectResult { return revisionEligibility(ev, users, m, or) }
	if or = recheck(meta); or.Outcome != "" {
		return or
	}
	if len(owners) == 0 {
		or.Outcome, or.Reason = OutcomeSkipped, "no live workload or Pod uses it (the orphan sweep decides about it)"
		return or
	}
	want := a.ownerRefs(owners)
	missing := missingOwners(meta.OwnerReferences, want)
	switch {
	case len(missing) == 0 && ev.Options.DryRun:
		or.Outcome = OutcomeAlreadyAttached
		return dryRunGuard(or, meta)
	case len(missing) == 0:
		or.Outcome, or.Reason = OutcomeAlreadyAttached, ""
		return a.guardPrune(ctx, or, guardTarget{ns: ev.Namespace, meta: meta, owners: want, recheck: recheck})
	case ev.Options.DryRun:
		or.Outcome, or.Owners = OutcomeWouldAttach, ownerNames(missing)
		return dryRunGuard(or, meta)
	}
	live, err := a.confirmUsers(ctx, ev.Namespace, owners)
	if err != nil {
		return or.failed("confirming its users", err)
	}
	if len(live) == 0 {
		or.Outcome, or.Reason = OutcomeSkipped, "its users are gone or being deleted"
		return or
	}
	liveRefs := a.ownerRefs(live)
	or, added, uid := a.addOwners(ctx, ev.Namespace, or, meta, liveRefs, recheck)
	if or.Outcome == OutcomeAlreadyAttached {
		or.Reason = ""
	}
	if len(added) > 0 {
		args := []any{"kind", ev.Kind, "namespace", ev.Namespace, "name", ev.Name, "owners", or.Owners}
		if or.Reason != "" {
			args = append(args, "reason", or.Reason)
		}
		a.log.Info("attached", args...)
		a.record(ev.Kind, ev.Namespace, ev.Name, uid, added)
		a.warn(ev.Kind, ev.Namespace, ev.Name, uid, or.Warnings, added)
	}
	return a.guardPrune(ctx, or, guardTarget{ns: ev.Namespace, meta: meta, owners: liveRefs, recheck: recheck})
}

// revisionEligibility applies safety rules 4, 2 and 11 to a revision's metadata: a
// result with an Outcome when it must not be written. An object that is neither opted in
// nor listed is eligible when it already has an owner of the kinds the service adds
// (CollectorOwner: once owned, protected while used); the result's Reason says so.
func revisionEligibility(ev RevisionEvent, users *Users, meta *metav1.PartialObjectMetadata, or ObjectResult) ObjectResult {
	optedIn := meta.Labels[LabelRevision] == "true" && ev.Options.Selector.Matches(labelSet(meta.Labels))
	held, isHeld := CollectorOwner(meta.OwnerReferences)
	switch {
	case ev.UID != "" && meta.UID != ev.UID:
		or.Outcome, or.Reason = OutcomeSkipped, "replaced by a namesake since the event"
	case meta.Annotations[AnnotationSkip] == "true" && isHeld:
		or.Outcome, or.Reason = OutcomeSkipped, heldSkipReason(held)
	case meta.Annotations[AnnotationSkip] == "true":
		or.Outcome, or.Reason = OutcomeSkipped, "has "+AnnotationSkip+"=true"
	case meta.DeletionTimestamp != nil:
		or.Outcome, or.Reason = OutcomeSkipped, "is being deleted"
	case optedIn || users.ListedBy(ev.Kind, ev.Name):
	case isHeld:
		or.Reason = heldReason(held)
	default:
		or.Outcome, or.Reason = OutcomeSkipped, fmt.Sprintf("not opted in: no %s=true label matching the selector %q, no annotation of a user lists it, and no owner the service adds owns it",
			LabelRevision, ev.Options.Selector.String())
	}
	return or
}
