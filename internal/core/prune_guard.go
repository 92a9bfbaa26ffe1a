package core

import (
	"context"
	"encoding/json"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Flux's kustomize-controller prunes every object of its inventory that left Git, whatever
// its ownerReferences, unless the live object carries FluxPruneKey: FluxPruneDisabled as a
// label or an annotation (docs/design.md, "Flux"). It prunes only objects that carry its
// name label.
const (
	// FluxNameLabel is set by kustomize-controller on every object a Kustomization applies.
	FluxNameLabel = "kustomize.toolkit.fluxcd.io/name"
	// FluxPruneKey with value FluxPruneDisabled keeps an object from Flux's prune.
	FluxPruneKey      = "kustomize.toolkit.fluxcd.io/prune"
	FluxPruneDisabled = "disabled"
)

// PruneGuard is the annotation the service adds, as "key=value" (ObjectResult.Annotations).
const PruneGuard = FluxPruneKey + "=" + FluxPruneDisabled

// needsPruneGuard reports whether a revision the service owns needs the prune guard: a
// Flux Kustomization applied it (its name label), and neither a label nor an annotation
// FluxPruneKey is there, whatever its value: a key that is there is the manifest's (or the
// user's), and writing another value would fight Flux's own apply.
func needsPruneGuard(m *metav1.PartialObjectMetadata) bool {
	if m == nil || m.Labels[FluxNameLabel] == "" {
		return false
	}
	_, label := m.Labels[FluxPruneKey]
	_, annotation := m.Annotations[FluxPruneKey]
	return !label && !annotation
}

// guardTarget is what guardPrune needs about one object: where it is, the metadata the
// owners were decided on, the owners the service keeps on it, and the eligibility check
// of the attach it follows.
type guardTarget struct {
	ns      string
	meta    *metav1.PartialObjectMetadata
	owners  []metav1.OwnerReference
	recheck func(*metav1.PartialObjectMetadata) ObjectResult
}

// guardPrune adds the annotation FluxPruneKey: FluxPruneDisabled to the object of or once
// it is owned (or.Outcome attached or already attached), in a write of its own: a patch
// of that one annotation by the service's field manager, never in the owner patch (safety
// rule 6). The patch carries the resourceVersion it was decided on; a conflict re-reads
// the object live and decides again (a key someone set meanwhile is left alone). The
// annotation is added only while one of t.owners is still among the object's owners, so
// the garbage collector deletes the object, annotation and all, with its last owner.
func (a *Attacher) guardPrune(ctx context.Context, or ObjectResult, t guardTarget) ObjectResult {
	if (or.Outcome != OutcomeAttached && or.Outcome != OutcomeAlreadyAttached) || !needsPruneGuard(t.meta) {
		return or
	}
	key := string(or.Kind) + "/" + t.ns + "/" + or.Name
	unlock := a.locks.lock(key)
	defer unlock()
	meta := a.written.fresher(key, t.meta)
	var lastErr error
	err := retry(ctx, a.cfg.Backoff, func(ctx context.Context) (bool, error) {
		if meta == nil {
			m, err := a.getMetaLive(ctx, or.Kind, t.ns, or.Name)
			if err != nil {
				return false, err
			}
			meta = m
		}
		if !needsPruneGuard(meta) || !guardable(meta, t) {
			return true, nil
		}
		after, err := a.patch(ctx, or.Kind, t.ns, or.Name, guardPatch(meta.ResourceVersion))
		switch {
		case err == nil:
			a.written.wrote(key, meta.ResourceVersion, after)
			or.Annotations = []string{PruneGuard}
			a.recordGuard(or.Kind, t.ns, or.Name, meta)
			return true, nil
		case apierrors.IsConflict(err):
			lastErr, meta = err, nil
			return false, nil
		}
		return false, err
	})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return or // gone: its owners' garbage collection, or a delete, came first
	case (errors.Is(err, errRetriesExhausted) || ctx.Err() != nil) && lastErr != nil:
		return or.failed("adding annotation "+PruneGuard+": still conflicting after retries", lastErr)
	}
	return or.failed("adding annotation "+PruneGuard, err)
}

// guardable: the object is still one the attach would write (t.recheck does not skip it;
// the attach's own checks return their result unchanged, already attached, when the object
// is eligible), not being deleted, and still owned by one of the owners the service keeps
// on it.
func guardable(m *metav1.PartialObjectMetadata, t guardTarget) bool {
	if m.DeletionTimestamp != nil || (t.recheck != nil && t.recheck(m).Outcome == OutcomeSkipped) {
		return false
	}
	for _, o := range t.owners {
		if hasOwner(m.OwnerReferences, o.UID) {
			return true
		}
	}
	return false
}

// guardPatch builds {"metadata":{"resourceVersion":RV,"annotations":{FluxPruneKey:"disabled"}}}:
// one annotation key, nothing else (a strategic merge patch merges annotations by key).
func guardPatch(resourceVersion string) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": resourceVersion,
		"annotations":     map[string]string{FluxPruneKey: FluxPruneDisabled},
	}})
	return b
}

// recordGuard emits a "PruneDisabled" Event on the config object.
func (a *Attacher) recordGuard(kind Kind, ns, name string, m *metav1.PartialObjectMetadata) {
	if a.cfg.Recorder == nil {
		return
	}
	om := metav1.ObjectMeta{Name: name, Namespace: ns, UID: m.UID}
	var obj runtime.Object = &corev1.ConfigMap{ObjectMeta: om}
	if kind == KindSecret {
		obj = &corev1.Secret{ObjectMeta: om}
	}
	a.cfg.Recorder.Eventf(obj, corev1.EventTypeNormal, "PruneDisabled",
		"Added annotation %s: Flux (Kustomization %s) keeps it once Git drops it; the garbage collector deletes it with its last owner",
		PruneGuard, m.Labels[FluxNameLabel])
}

// dryRunGuard reports, in a dry run, the annotation a real run would add.
func dryRunGuard(or ObjectResult, m *metav1.PartialObjectMetadata) ObjectResult {
	if needsPruneGuard(m) {
		or.Annotations = []string{PruneGuard}
	}
	return or
}

// dryRunAttach is the outcome a real run would give p: would-attach with the owners it
// lacks, or already-attached when only the prune guard is missing, and that guard.
func dryRunAttach(or ObjectResult, p pendingWrite) ObjectResult {
	or.Outcome = OutcomeAlreadyAttached
	if missing := missingOwners(p.meta.OwnerReferences, p.want); len(missing) > 0 {
		or.Outcome, or.Owners = OutcomeWouldAttach, ownerNames(missing)
	}
	return dryRunGuard(or, p.meta)
}
