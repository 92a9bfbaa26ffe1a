package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
)

// ListedOwnerWait finds the ReplicaSet a one-shot command attaches its listed names to
// (safety rule 10, docs/safety.md): the workload's current ReplicaSet, but never one that
// is older than the config it is asked to own. It exists for the old Job's form, run as
// an Argo CD Sync hook, which can start before Argo CD applies the new workload spec.
type ListedOwnerWait struct {
	Client   kubernetes.Interface
	Dynamic  dynamic.Interface
	Metadata metadata.Interface
	// Interval between tries; zero means one second.
	Interval time.Duration
	// Progress, when set, is called about every ProgressEvery (zero: 5 s) while
	// waiting, with what is still missing.
	Progress      func(missing string)
	ProgressEvery time.Duration
}

// ReplicaSetFor waits until ctx ends for the ReplicaSet of workload kind ns/name
// (CurrentReplicaSet) that the listed config objects belong to, and returns it. The
// current ReplicaSet is taken when, for every listed object, either
//
//   - its pod template, its annotations, its template's or the workload's annotations
//     use the object (ObjectRefs), or
//   - the object exists and is not newer than the ReplicaSet (created before it, or in
//     the same second): no template may ever use it (the application reads it at run
//     time), so it goes to the current ReplicaSet as with the old Job; the returned note
//     says so.
//
// Otherwise it waits: a listed object that no template uses yet and that is newer than
// the current ReplicaSet is config of a spec the controller has not turned into a
// ReplicaSet yet, and a listed object that does not exist yet may still be applied. The
// error on timeout names what was still missing.
func (w ListedOwnerWait) ReplicaSetFor(ctx context.Context, kind, ns, name string, listed []Ref) (*appsv1.ReplicaSet, string, error) {
	var rs *appsv1.ReplicaSet
	var note string
	err := w.poll(ctx, func(ctx context.Context) error {
		cur, err := CurrentReplicaSet(ctx, w.Client, w.Dynamic, kind, ns, name)
		if err != nil {
			return err
		}
		ann, err := workloadAnnotations(ctx, w.Client, w.Dynamic, kind, ns, name)
		if err != nil {
			return err
		}
		note, err = w.belongs(ctx, cur, ann, listed)
		rs = cur
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return rs, note, nil
}

// belongs checks the listed objects against rs (see ReplicaSetFor): nil when rs may own
// them all (with a note for those only their age allows), a wrapped ErrNotReady naming
// the first that may not.
func (w ListedOwnerWait) belongs(ctx context.Context, rs *appsv1.ReplicaSet, workloadAnn []map[string]string, listed []Ref) (string, error) {
	uses := map[refKey]bool{}
	for _, r := range ObjectRefs(rs) {
		uses[refKey{r.Kind, r.Name}] = true
	}
	s := newRefSet()
	addAnnotationRefs(s, workloadAnn)
	for _, r := range s.list() {
		uses[refKey{r.Kind, r.Name}] = true
	}
	var aged []string
	for _, r := range listed {
		if uses[refKey{r.Kind, r.Name}] {
			continue
		}
		m, err := w.Metadata.Resource(r.Kind.GVR()).Namespace(rs.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return "", fmt.Errorf("%w: %s %s/%s does not exist yet", ErrNotReady, r.Kind, rs.Namespace, r.Name)
		case err != nil:
			return "", err
		case m.CreationTimestamp.After(rs.CreationTimestamp.Time):
			return "", fmt.Errorf("%w: the current ReplicaSet %s (created %s) does not use %s %s, which is newer (created %s): waiting for the workload's new spec to be applied and its ReplicaSet created",
				ErrNotReady, rs.Name, stamp(rs.CreationTimestamp), r.Kind, r.Name, stamp(m.CreationTimestamp))
		}
		aged = append(aged, string(r.Kind)+" "+r.Name)
	}
	if len(aged) == 0 {
		return "", nil
	}
	return fmt.Sprintf("no pod template or annotation uses %s; not newer than the current ReplicaSet %s, so attached to it as the old Job did",
		strings.Join(aged, ", "), rs.Name), nil
}

func stamp(t metav1.Time) string { return t.UTC().Format(time.RFC3339) }

// workloadAnnotations returns the annotations of the workload and, for a Rollout, of
// the Deployment its spec.workloadRef names (as Attach reads them).
func workloadAnnotations(ctx context.Context, kc kubernetes.Interface, dc dynamic.Interface, kind, ns, name string) ([]map[string]string, error) {
	switch kind {
	case "Deployment":
		d, err := kc.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return []map[string]string{d.Annotations}, nil
	case RolloutKind:
		ro, err := dc.Resource(RolloutGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		out := []map[string]string{ro.GetAnnotations()}
		if k, n := RolloutWorkloadRef(ro); k == "Deployment" && n != "" {
			d, err := kc.AppsV1().Deployments(ns).Get(ctx, n, metav1.GetOptions{})
			switch {
			case err == nil:
				out = append(out, d.Annotations)
			case !apierrors.IsNotFound(err):
				return nil, err
			}
		}
		return out, nil
	}
	return nil, nil
}

// poll calls try every Interval until it succeeds, fails for another reason than
// ErrNotReady, NotFound or a transient API error, or ctx ends; every ProgressEvery it
// reports the last reason to Progress. On timeout the error names what was missing.
func (w ListedOwnerWait) poll(ctx context.Context, try func(context.Context) error) error {
	interval, every := w.Interval, w.ProgressEvery
	if interval <= 0 {
		interval = time.Second
	}
	if every <= 0 {
		every = 5 * time.Second
	}
	var last error
	reported := time.Now()
	err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		err := try(ctx)
		if err == nil {
			return true, nil
		}
		if !waitable(err) {
			return false, err
		}
		if last == nil || !cutShort(ctx, err) { // a try the deadline cut short keeps the last real reason
			last = err
		}
		if w.Progress != nil && time.Since(reported) >= every {
			reported = time.Now()
			w.Progress(OneLine(last.Error()))
		}
		return false, nil
	})
	if err != nil && last != nil && ctx.Err() != nil {
		return fmt.Errorf("timed out waiting: %w", last)
	}
	return err
}

// waitable reports whether a try's error means "not yet": the controller has not caught
// up, an object does not exist yet, or the cluster failed transiently.
func waitable(err error) bool {
	return errors.Is(err, ErrNotReady) || apierrors.IsNotFound(err) || (!IsPermanent(err) && !errors.Is(err, ErrInvalid))
}
