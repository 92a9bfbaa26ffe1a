package core

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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
	// Settle is how long after a listed object was created the workload's new spec may
	// still be on its way (an Argo CD sync applies a wave's ConfigMaps before its
	// workloads); zero means DefaultSettle. See ReplicaSetFor.
	Settle time.Duration
	// Now is the apiserver's clock, which creation times are compared with; nil means
	// time.Now.
	Now func() time.Time
}

// DefaultSettle is ListedOwnerWait.Settle's default.
const DefaultSettle = time.Minute

// ErrWaitCannotHelp means that what a one-shot command would wait for will not come:
// the workload does not exist, or a listed object is config that neither the current
// ReplicaSet nor the workload's spec uses, and the workload's controller has caught up
// (docs/safety.md, "The old Job's form never picks an older ReplicaSet"). The command
// fails at once instead of waiting for its timeout.
var ErrWaitCannotHelp = errors.New("waiting cannot help")

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
// Otherwise it waits for what may still come: the controller observing a new
// generation, the ReplicaSet of the new pod hash or revision, a listed object that does
// not exist yet, the ReplicaSet of a spec that uses a listed object, and, for Settle
// after a listed object newer than the current ReplicaSet was created, the spec that
// uses it. It fails at once, with an error wrapping ErrWaitCannotHelp, when nothing
// will change: the workload does not exist (wrapping the NotFound too), or a listed
// object is newer than the current ReplicaSet, used by neither it nor the workload's
// spec, and older than Settle. The error on timeout names what was still missing.
func (w ListedOwnerWait) ReplicaSetFor(ctx context.Context, kind, ns, name string, listed []Ref) (*appsv1.ReplicaSet, string, error) {
	var rs *appsv1.ReplicaSet
	var note string
	err := w.poll(ctx, func(ctx context.Context) error {
		cur, err := CurrentReplicaSet(ctx, w.Client, w.Dynamic, kind, ns, name)
		if err != nil {
			return workloadGone(err)
		}
		spec, err := readWorkloadSpec(ctx, w.Client, w.Dynamic, kind, ns, name)
		if err != nil {
			return workloadGone(err)
		}
		note, err = w.belongs(ctx, cur, spec, listed)
		rs = cur
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return rs, note, nil
}

// workloadGone marks a workload that does not exist as not worth waiting for; other
// errors pass unchanged.
func workloadGone(err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w (%w)", err, ErrWaitCannotHelp)
	}
	return err
}

// belongs checks the listed objects against rs (see ReplicaSetFor): nil when rs may own
// them all (with a note for those only their age allows); a wrapped ErrWaitCannotHelp
// naming the first that can never belong to it; else a wrapped ErrNotReady naming the
// first that may not yet.
func (w ListedOwnerWait) belongs(ctx context.Context, rs *appsv1.ReplicaSet, spec workloadSpec, listed []Ref) (string, error) {
	uses := refKeys(ObjectRefs(rs))
	s := newRefSet()
	addAnnotationRefs(s, spec.annotations)
	for k := range refKeys(s.list()) {
		uses[k] = true
	}
	specUses := map[refKey]bool{}
	if spec.template != nil {
		specUses = refKeys(ObjectRefs(&appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Template: *spec.template}}))
	}
	var aged []string
	var notYet, never error
	for _, r := range listed {
		k := refKey{r.Kind, r.Name}
		if uses[k] {
			continue
		}
		m, err := w.Metadata.Resource(r.Kind.GVR()).Namespace(rs.Namespace).Get(ctx, r.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			notYet = cmp.Or(notYet, fmt.Errorf("%w: %s %s/%s does not exist yet", ErrNotReady, r.Kind, rs.Namespace, r.Name))
		case err != nil:
			return "", err
		case !m.CreationTimestamp.After(rs.CreationTimestamp.Time):
			aged = append(aged, string(r.Kind)+" "+r.Name)
		case specUses[k]:
			notYet = cmp.Or(notYet, fmt.Errorf("%w: the %s's spec uses %s %s; waiting for its controller to create that ReplicaSet (the current one, %s, does not use it)",
				ErrNotReady, spec.kind, r.Kind, r.Name, rs.Name))
		case w.now().Sub(m.CreationTimestamp.Time) < w.settle():
			notYet = cmp.Or(notYet, fmt.Errorf("%w: the current ReplicaSet %s (created %s) does not use %s %s, which is newer (created %s): waiting for the workload's new spec to be applied and its ReplicaSet created",
				ErrNotReady, rs.Name, stamp(rs.CreationTimestamp), r.Kind, r.Name, stamp(m.CreationTimestamp)))
		default:
			never = cmp.Or(never, w.settled(rs, spec, r, m.CreationTimestamp))
		}
	}
	if err := cmp.Or(never, notYet); err != nil {
		return "", err
	}
	if len(aged) == 0 {
		return "", nil
	}
	return fmt.Sprintf("no pod template or annotation uses %s; not newer than the current ReplicaSet %s, so attached to it as the old Job did",
		strings.Join(aged, ", "), rs.Name), nil
}

// settled is the error for listed object r, newer than rs, that neither rs nor the
// workload's spec uses, created more than Settle ago.
func (w ListedOwnerWait) settled(rs *appsv1.ReplicaSet, spec workloadSpec, r Ref, created metav1.Time) error {
	ann, flag := AnnotationConfigMaps, "--configmaps"
	if r.Kind == KindSecret {
		ann, flag = AnnotationSecrets, "--secrets"
	}
	return fmt.Errorf("%w: %s %s/%s (created %s, %s ago) is newer than the current ReplicaSet %s (created %s), and neither that ReplicaSet, "+
		"the %s's spec nor an annotation uses it, while the %s's controller has caught up with its spec; "+
		"if the application reads it at run time, list it in the %s's %s annotation (its next ReplicaSet then owns it), "+
		"or attach it to that ReplicaSet: configmap-attacher attach --replicaset %s -n %s %s %s",
		ErrWaitCannotHelp, r.Kind, rs.Namespace, r.Name, stamp(created), w.now().Sub(created.Time).Round(time.Second), rs.Name, stamp(rs.CreationTimestamp),
		spec.kind, spec.kind, spec.kind, ann, rs.Name, rs.Namespace, flag, r.Name)
}

func (w ListedOwnerWait) settle() time.Duration { return cmp.Or(w.Settle, DefaultSettle) }

func (w ListedOwnerWait) now() time.Time {
	if w.Now == nil {
		return time.Now()
	}
	return w.Now()
}

func refKeys(refs []Ref) map[refKey]bool {
	out := make(map[refKey]bool, len(refs))
	for _, r := range refs {
		out[refKey{r.Kind, r.Name}] = true
	}
	return out
}

func stamp(t metav1.Time) string { return t.UTC().Format(time.RFC3339) }

// workloadSpec is what a workload's spec says about the config it uses: its
// annotations (and those of the Deployment a Rollout's spec.workloadRef names) and the
// pod template its controller turns into ReplicaSets.
type workloadSpec struct {
	kind        string
	annotations []map[string]string
	template    *corev1.PodTemplateSpec
}

// readWorkloadSpec reads the workload's workloadSpec (as Attach reads its annotations).
func readWorkloadSpec(ctx context.Context, kc kubernetes.Interface, dc dynamic.Interface, kind, ns, name string) (workloadSpec, error) {
	spec := workloadSpec{kind: kind}
	switch kind {
	case "Deployment":
		d, err := kc.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return spec, err
		}
		spec.annotations, spec.template = []map[string]string{d.Annotations}, &d.Spec.Template
	case RolloutKind:
		ro, err := dc.Resource(RolloutGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return spec, err
		}
		spec.annotations = []map[string]string{ro.GetAnnotations()}
		spec.template = rolloutTemplate(ro)
		if k, n := RolloutWorkloadRef(ro); k == "Deployment" && n != "" {
			d, err := kc.AppsV1().Deployments(ns).Get(ctx, n, metav1.GetOptions{})
			switch {
			case err == nil:
				spec.annotations, spec.template = append(spec.annotations, d.Annotations), &d.Spec.Template
			case !apierrors.IsNotFound(err):
				return spec, err
			}
		}
	}
	return spec, nil
}

// rolloutTemplate is a Rollout's spec.template, or nil when it has none that decodes.
func rolloutTemplate(ro *unstructured.Unstructured) *corev1.PodTemplateSpec {
	raw, ok, _ := unstructured.NestedMap(ro.Object, "spec", "template")
	if !ok {
		return nil
	}
	var tmpl corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &tmpl); err != nil {
		return nil
	}
	return &tmpl
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
	if errors.Is(err, ErrWaitCannotHelp) {
		return false
	}
	return errors.Is(err, ErrNotReady) || apierrors.IsNotFound(err) || (!IsPermanent(err) && !errors.Is(err, ErrInvalid))
}
