package gc

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Source reads what the planner needs. Implementations must list every object of a
// kind they put in Snapshot.Listed; a failed list is an error (wrapping
// core.ErrUnavailable when transient), never a partial snapshot.
type Source interface {
	// Snapshot reads one namespace.
	Snapshot(ctx context.Context, namespace string) (*Snapshot, error)
	// Namespaces returns the namespaces that hold at least one opted-in revision, sorted.
	Namespaces(ctx context.Context) ([]string, error)
}

// LiveSource lists straight from the apiserver: revisions through the metadata client
// (label selector configmap-attacher.io/revision=true; no data is transferred), the
// workload kinds of WorkloadKinds through the typed and dynamic clients. A missing
// Rollout CRD means "no Rollouts" (the kind is still listed: no Rollout can own or
// reference anything).
type LiveSource struct {
	Client   kubernetes.Interface
	Dynamic  dynamic.Interface
	Metadata metadata.Interface
	// IncludeSecrets also lists opted-in Secrets (metadata only).
	IncludeSecrets bool
}

func (l LiveSource) kinds() []core.Kind {
	if l.IncludeSecrets {
		return []core.Kind{core.KindConfigMap, core.KindSecret}
	}
	return []core.Kind{core.KindConfigMap}
}

// Namespaces implements Source with one metadata list per kind across all namespaces.
func (l LiveSource) Namespaces(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	for _, k := range l.kinds() {
		list, err := l.Metadata.Resource(k.GVR()).List(ctx, metav1.ListOptions{LabelSelector: core.DefaultSelector})
		if err != nil {
			return nil, listErr("listing "+string(k)+"s in all namespaces", err)
		}
		for _, m := range list.Items {
			seen[m.Namespace] = true
		}
	}
	out := make([]string, 0, len(seen))
	for ns := range seen {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out, nil
}

// Snapshot implements Source. Errors wrap core.ErrUnavailable for transient failures.
func (l LiveSource) Snapshot(ctx context.Context, ns string) (*Snapshot, error) {
	s := &Snapshot{Namespace: ns, Listed: map[schema.GroupKind]bool{}, Live: map[types.UID]bool{}}
	for _, k := range l.kinds() {
		list, err := l.Metadata.Resource(k.GVR()).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: core.DefaultSelector})
		if err != nil {
			return nil, listErr("listing "+string(k)+"s in "+ns, err)
		}
		for i := range list.Items {
			s.Revisions = append(s.Revisions, RevisionFromMeta(k, &list.Items[i].ObjectMeta))
		}
	}
	add := func(gk schema.GroupKind, ws ...Workload) {
		s.Listed[gk] = true
		for _, w := range ws {
			s.Workloads = append(s.Workloads, w)
			s.Live[w.UID] = true
		}
	}
	apps, batch, corev := l.Client.AppsV1(), l.Client.BatchV1(), l.Client.CoreV1()
	opts := metav1.ListOptions{}
	if list, err := apps.ReplicaSets(ns).List(ctx, opts); err != nil {
		return nil, listErr("listing ReplicaSets in "+ns, err)
	} else {
		for i := range list.Items {
			add(GKReplicaSet, FromReplicaSet(&list.Items[i]))
		}
		s.Listed[GKReplicaSet] = true
	}
	if list, err := apps.Deployments(ns).List(ctx, opts); err != nil {
		return nil, listErr("listing Deployments in "+ns, err)
	} else {
		for i := range list.Items {
			add(GKDeployment, FromDeployment(&list.Items[i]))
		}
		s.Listed[GKDeployment] = true
	}
	if list, err := apps.StatefulSets(ns).List(ctx, opts); err != nil {
		return nil, listErr("listing StatefulSets in "+ns, err)
	} else {
		for i := range list.Items {
			add(GKStatefulSet, FromStatefulSet(&list.Items[i]))
		}
		s.Listed[GKStatefulSet] = true
	}
	if list, err := apps.DaemonSets(ns).List(ctx, opts); err != nil {
		return nil, listErr("listing DaemonSets in "+ns, err)
	} else {
		for i := range list.Items {
			add(GKDaemonSet, FromDaemonSet(&list.Items[i]))
		}
		s.Listed[GKDaemonSet] = true
	}
	if list, err := batch.Jobs(ns).List(ctx, opts); err != nil {
		return nil, listErr("listing Jobs in "+ns, err)
	} else {
		for i := range list.Items {
			add(GKJob, FromJob(&list.Items[i]))
		}
		s.Listed[GKJob] = true
	}
	if list, err := batch.CronJobs(ns).List(ctx, opts); err != nil {
		return nil, listErr("listing CronJobs in "+ns, err)
	} else {
		for i := range list.Items {
			add(GKCronJob, FromCronJob(&list.Items[i]))
		}
		s.Listed[GKCronJob] = true
	}
	if list, err := corev.Pods(ns).List(ctx, opts); err != nil {
		return nil, listErr("listing Pods in "+ns, err)
	} else {
		for i := range list.Items {
			add(GKPod, FromPod(&list.Items[i]))
		}
		s.Listed[GKPod] = true
	}
	list, err := l.Dynamic.Resource(core.RolloutGVR).Namespace(ns).List(ctx, opts)
	switch {
	case apierrors.IsNotFound(err): // no Rollout CRD: no Rollouts
	case err != nil:
		return nil, listErr("listing Rollouts in "+ns, err)
	default:
		for i := range list.Items {
			w, err := FromRollout(&list.Items[i])
			if err != nil {
				return nil, fmt.Errorf("decoding Rollout %s/%s: %w", ns, list.Items[i].GetName(), err)
			}
			add(GKRollout, w)
		}
	}
	s.Listed[GKRollout] = true
	return s, nil
}

func listErr(what string, err error) error {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%s: %w: %w", what, core.ErrUnavailable, err)
}
