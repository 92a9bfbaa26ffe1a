package gc

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// confirm reads the candidate live right before its delete, as Kubernetes' garbage
// collector confirms a dangling owner before it deletes a dependent (docs/design.md,
// "The sweep from the caches"). The delete goes ahead (ok) only when the live object is
// the one planned (same UID and resourceVersion, so the same labels, annotations and
// owners the plan saw) and each of its owners is confirmed gone by a live read of its
// own; otherwise the outcome says why it is kept. It costs one GET per candidate, plus
// one per ownerReference (a candidate normally has none).
func (e *Executor) confirm(ctx context.Context, ns string, it Item) (Outcome, string, bool) {
	live, err := e.liveMeta(ctx, it.Kind, ns, it.Name)
	switch {
	case apierrors.IsNotFound(err):
		return OutcomeGone, "", false
	case err != nil:
		return OutcomeError, "confirming before delete: " + err.Error(), false
	case live.UID != it.UID || live.ResourceVersion != it.ResourceVersion:
		return OutcomeChanged, fmt.Sprintf("changed since it was planned (live resourceVersion %s, planned %s)", live.ResourceVersion, it.ResourceVersion), false
	}
	for _, or := range live.OwnerReferences {
		gone, err := e.ownerGone(ctx, ns, or)
		if err != nil {
			return OutcomeError, "confirming owner " + or.Kind + "/" + or.Name + ": " + err.Error(), false
		}
		if !gone {
			return OutcomeKept, "owner " + or.Kind + "/" + or.Name + " is live (confirmed before delete)", false
		}
	}
	return "", "", true
}

func (e *Executor) liveMeta(ctx context.Context, kind core.Kind, ns, name string) (*metav1.ObjectMeta, error) {
	if e.Metadata != nil {
		m, err := e.Metadata.Resource(kind.GVR()).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &m.ObjectMeta, nil
	}
	if kind == core.KindSecret {
		s, err := e.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return &s.ObjectMeta, nil
	}
	c, err := e.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return &c.ObjectMeta, nil
}

// ownerGone reads an owner live by kind and name: gone when it is not found or has
// another UID. An owner of a kind this package cannot read counts as live (never delete
// on doubt; Kubernetes' garbage collector handles dangling owners itself).
func (e *Executor) ownerGone(ctx context.Context, ns string, or metav1.OwnerReference) (bool, error) {
	get := e.ownerGetter(groupKind(or.APIVersion, or.Kind))
	if get == nil {
		return false, nil
	}
	m, err := get(ctx, ns, or.Name)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	}
	return m.GetUID() != or.UID, nil
}

type metaGetter func(ctx context.Context, ns, name string) (metav1.Object, error)

func (e *Executor) ownerGetter(gk schema.GroupKind) metaGetter {
	apps, batch, corev := e.Client.AppsV1(), e.Client.BatchV1(), e.Client.CoreV1()
	o := metav1.GetOptions{}
	switch gk {
	case GKReplicaSet:
		return func(ctx context.Context, ns, n string) (metav1.Object, error) {
			return apps.ReplicaSets(ns).Get(ctx, n, o)
		}
	case GKDeployment:
		return func(ctx context.Context, ns, n string) (metav1.Object, error) {
			return apps.Deployments(ns).Get(ctx, n, o)
		}
	case GKStatefulSet:
		return func(ctx context.Context, ns, n string) (metav1.Object, error) {
			return apps.StatefulSets(ns).Get(ctx, n, o)
		}
	case GKDaemonSet:
		return func(ctx context.Context, ns, n string) (metav1.Object, error) {
			return apps.DaemonSets(ns).Get(ctx, n, o)
		}
	case GKJob:
		return func(ctx context.Context, ns, n string) (metav1.Object, error) { return batch.Jobs(ns).Get(ctx, n, o) }
	case GKCronJob:
		return func(ctx context.Context, ns, n string) (metav1.Object, error) {
			return batch.CronJobs(ns).Get(ctx, n, o)
		}
	case GKPod:
		return func(ctx context.Context, ns, n string) (metav1.Object, error) { return corev.Pods(ns).Get(ctx, n, o) }
	}
	return nil
}
