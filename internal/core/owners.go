package core

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// usersOf returns the owners that must keep the config object kind ns/name besides
// exclude (the ReplicaSet an Attach is for): Users.Owners of what the Reader finds.
func (a *Attacher) usersOf(ctx context.Context, kind Kind, ns, name string, exclude types.UID) (*Users, []User, error) {
	u, err := a.cfg.Reader.Users(ctx, kind, ns, name)
	if err != nil {
		return nil, nil, err
	}
	var out []User
	for _, usr := range u.Owners() {
		if usr.UID != exclude {
			out = append(out, usr)
		}
	}
	return u, out, nil
}

// missingOwners returns the owners of want whose UID is not among have.
func missingOwners(have, want []metav1.OwnerReference) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, w := range want {
		if !hasOwner(have, w.UID) {
			out = append(out, w)
		}
	}
	return out
}

// ownerRefs returns users as non-controller owners; a ReplicaSet gets blockOwnerDeletion
// when configured, as the event's own ReplicaSet does (docs/safety.md, "How the owners are
// added"), whichever entry point adds it.
func (a *Attacher) ownerRefs(users []User) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(users))
	for _, u := range users {
		ref := u.OwnerReference()
		if a.cfg.BlockOwnerDeletion && u.APIVersion == "apps/v1" && u.Kind == "ReplicaSet" {
			ref.BlockOwnerDeletion = ptrTo(true)
		}
		out = append(out, ref)
	}
	return out
}

func ownerNames(refs []metav1.OwnerReference) []string {
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.Kind+"/"+r.Name)
	}
	return out
}

// confirmUsers reads every user live (safety rule 2: an owner that is gone or being
// deleted would let the garbage collector delete the object at once) and returns those
// that exist with the same UID and no deletionTimestamp.
func (a *Attacher) confirmUsers(ctx context.Context, ns string, users []User) ([]User, error) {
	var live []User
	for _, u := range users {
		m, err := a.getUserMeta(ctx, ns, u)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, apiFailure("confirming", u.Kind+" "+ns+"/"+u.Name, err)
		}
		if m.GetUID() == u.UID && m.GetDeletionTimestamp() == nil {
			live = append(live, u)
		}
	}
	return live, nil
}

func (a *Attacher) getUserMeta(ctx context.Context, ns string, u User) (metav1.Object, error) {
	apps, batch, o := a.cfg.Client.AppsV1(), a.cfg.Client.BatchV1(), metav1.GetOptions{}
	switch u.Kind {
	case "ReplicaSet":
		return apps.ReplicaSets(ns).Get(ctx, u.Name, o)
	case "ControllerRevision":
		return apps.ControllerRevisions(ns).Get(ctx, u.Name, o)
	case "StatefulSet":
		return apps.StatefulSets(ns).Get(ctx, u.Name, o)
	case "DaemonSet":
		return apps.DaemonSets(ns).Get(ctx, u.Name, o)
	case "Job":
		return batch.Jobs(ns).Get(ctx, u.Name, o)
	case "CronJob":
		return batch.CronJobs(ns).Get(ctx, u.Name, o)
	case "Pod":
		return a.cfg.Client.CoreV1().Pods(ns).Get(ctx, u.Name, o)
	}
	return nil, Invalidf("kind", "%q cannot own a config object", u.Kind)
}

// addOwners adds to the object of or (in ns) every owner of want it lacks, with a
// strategic merge patch that touches only metadata.ownerReferences (merge key uid: other
// owners are kept, safety rules 3 and 6) and carries the resourceVersion the decision
// was made on as a precondition: if the object changed since (opted out, replaced by a
// namesake, data edited), the apiserver answers 409 Conflict and the object is re-read
// live and re-checked with recheck (a result with an Outcome ends the work), so a stale
// cache never leads to a write the live object would not get (rule 4). meta nil means
// "read live first". It returns the result, the owners it added and the UID of the
// object written.
func (a *Attacher) addOwners(ctx context.Context, ns string, or ObjectResult, meta *metav1.PartialObjectMetadata,
	want []metav1.OwnerReference, recheck func(*metav1.PartialObjectMetadata) ObjectResult) (ObjectResult, []metav1.OwnerReference, types.UID) {
	key := string(or.Kind) + "/" + ns + "/" + or.Name
	unlock := a.locks.lock(key)
	defer unlock()
	meta = a.written.fresher(key, meta)

	var lastErr error
	var added []metav1.OwnerReference
	var wrote *metav1.PartialObjectMetadata
	err := retry(ctx, a.cfg.Backoff, func(ctx context.Context) (bool, error) {
		if meta == nil {
			m, err := a.getMetaLive(ctx, or.Kind, ns, or.Name)
			if err != nil {
				return false, err
			}
			if e := recheck(m); e.Outcome != "" {
				or = e
				return true, nil
			}
			meta = m
		}
		missing := missingOwners(meta.OwnerReferences, want)
		if len(missing) == 0 {
			or.Outcome = OutcomeAlreadyAttached
			return true, nil
		}
		patch, err := ownerPatch(meta.ResourceVersion, missing)
		if err != nil {
			return false, err
		}
		after, err := a.patch(ctx, or.Kind, ns, or.Name, patch)
		switch {
		case err == nil:
			or.Outcome, or.Owners, added = OutcomeAttached, ownerNames(missing), missing
			or.Warnings, wrote = Unprotected(or.Kind, &after.ObjectMeta), after
			a.written.wrote(key, meta.ResourceVersion, after)
			return true, nil
		case apierrors.IsConflict(err):
			lastErr = err
			meta = nil // re-read and re-check
			return false, nil
		}
		return false, err
	})
	switch {
	case err == nil && len(added) > 0:
		if w := a.appWarning(ctx, or.Kind, &wrote.ObjectMeta); w != nil {
			or.Warnings = append(or.Warnings, *w)
		}
		return or, added, meta.UID
	case err == nil:
		return or, nil, ""
	case apierrors.IsNotFound(err):
		or.Outcome, or.Reason = OutcomeMissing, "deleted before the owner could be added"
	case (errors.Is(err, errRetriesExhausted) || ctx.Err() != nil) && lastErr != nil:
		or = or.failed("still conflicting after retries", lastErr)
	default:
		or = or.failed("writing", err)
	}
	return or, nil, ""
}

// ownerPatch builds {"metadata":{"resourceVersion":RV,"ownerReferences":[owners]}}. The
// resourceVersion makes the apiserver answer 409 Conflict if the object changed since it
// was evaluated (Kubernetes API conventions, "Concurrency Control and Consistency").
func ownerPatch(resourceVersion string, owners []metav1.OwnerReference) ([]byte, error) {
	return json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": resourceVersion,
			"ownerReferences": owners,
		},
	})
}

// describeOwners renders owners for logs and Events: "ReplicaSet web-1 (uid …), Job migrate (uid …)".
func describeOwners(owners []metav1.OwnerReference) string {
	parts := make([]string, 0, len(owners))
	for _, o := range owners {
		parts = append(parts, o.Kind+" "+o.Name+" (uid "+string(o.UID)+")")
	}
	return strings.Join(parts, ", ")
}

var errRetriesExhausted = errors.New("retries exhausted")

// retry calls try until it is done or fails, at most b.Steps times, sleeping between
// tries for b.Duration growing by b.Factor up to b.Cap, with b.Jitter. Unlike
// wait.ExponentialBackoff, which stops once the delay reaches its cap, it keeps trying at
// the cap: DefaultBackoff's 30 tries are 30 tries. It returns errRetriesExhausted when
// every try said "not done", and ctx's error when ctx ends first.
func retry(ctx context.Context, b wait.Backoff, try func(context.Context) (bool, error)) error {
	d := b.Duration
	for i := 0; i < b.Steps; i++ {
		if done, err := try(ctx); done || err != nil {
			return err
		}
		if i == b.Steps-1 {
			break
		}
		sleep := d
		if b.Jitter > 0 {
			sleep = wait.Jitter(d, b.Jitter)
		}
		t := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if d = time.Duration(float64(d) * b.Factor); b.Cap > 0 && d > b.Cap {
			d = b.Cap
		}
	}
	return errRetriesExhausted
}
