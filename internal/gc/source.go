package gc

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
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

// Snapshot implements Source. The lists run concurrently (one request per kind, all at
// once: planning time is the slowest list, not their sum) and the snapshot is assembled
// in a fixed order, so it does not depend on which list answered first. Errors wrap
// core.ErrUnavailable for transient failures; the first failed list (in that fixed
// order) is the one reported.
func (l LiveSource) Snapshot(ctx context.Context, ns string) (*Snapshot, error) {
	kinds := l.kinds()
	revs := make([][]Revision, len(kinds))
	jobs := make([]func(context.Context) error, 0, len(kinds)+10)
	for i, k := range kinds {
		jobs = append(jobs, func(ctx context.Context) error {
			list, err := l.Metadata.Resource(k.GVR()).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: core.DefaultSelector})
			if err != nil {
				return listErr("listing "+string(k)+"s in "+ns, err)
			}
			revs[i] = make([]Revision, len(list.Items))
			for j := range list.Items {
				revs[i][j] = RevisionFromMeta(k, &list.Items[j].ObjectMeta)
			}
			return nil
		})
	}
	lists := l.workloadLists(ns)
	got := make([]listed, len(lists))
	for i, f := range lists {
		jobs = append(jobs, func(ctx context.Context) (err error) {
			got[i], err = f(ctx)
			return err
		})
	}
	if err := runAll(ctx, jobs); err != nil {
		return nil, err
	}
	s := &Snapshot{Namespace: ns, Listed: map[schema.GroupKind]bool{}, Live: map[types.UID]bool{}}
	for _, r := range revs {
		s.Revisions = append(s.Revisions, r...)
	}
	for _, g := range got {
		s.Listed[g.gk] = true
		for _, w := range g.ws {
			s.Workloads = append(s.Workloads, w)
			s.Live[w.UID] = true
		}
	}
	return s, nil
}

// runAll runs the jobs at once and returns the first failure in the jobs' order; the
// first failure cancels the others. A job cut short because another one failed reports
// that failure, not the cancellation; when the caller's ctx ended, that is the error.
func runAll(ctx context.Context, jobs []func(context.Context) error) error {
	errs := make([]error, len(jobs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, job := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = job(ctx); errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	var first error
	for _, err := range errs {
		switch {
		case err == nil:
		case first == nil:
			first = err
		case errors.Is(first, context.Canceled) && !errors.Is(err, context.Canceled):
			first = err
		}
	}
	return first
}

// workloadLists returns one list per workload kind in ns, each read in full.
func (l LiveSource) workloadLists(ns string) []func(context.Context) (listed, error) {
	apps, batch, corev := l.Client.AppsV1(), l.Client.BatchV1(), l.Client.CoreV1()
	opts := metav1.ListOptions{}
	in := " in " + ns
	return []func(ctx context.Context) (listed, error){
		kindList(GKReplicaSet, "ReplicaSets"+in, func(ctx context.Context) ([]appsv1.ReplicaSet, error) {
			l, err := apps.ReplicaSets(ns).List(ctx, opts)
			return itemsOf(l, err, func(l *appsv1.ReplicaSetList) []appsv1.ReplicaSet { return l.Items })
		}, FromReplicaSet),
		kindList(GKDeployment, "Deployments"+in, func(ctx context.Context) ([]appsv1.Deployment, error) {
			l, err := apps.Deployments(ns).List(ctx, opts)
			return itemsOf(l, err, func(l *appsv1.DeploymentList) []appsv1.Deployment { return l.Items })
		}, FromDeployment),
		kindList(GKStatefulSet, "StatefulSets"+in, func(ctx context.Context) ([]appsv1.StatefulSet, error) {
			l, err := apps.StatefulSets(ns).List(ctx, opts)
			return itemsOf(l, err, func(l *appsv1.StatefulSetList) []appsv1.StatefulSet { return l.Items })
		}, FromStatefulSet),
		kindList(GKDaemonSet, "DaemonSets"+in, func(ctx context.Context) ([]appsv1.DaemonSet, error) {
			l, err := apps.DaemonSets(ns).List(ctx, opts)
			return itemsOf(l, err, func(l *appsv1.DaemonSetList) []appsv1.DaemonSet { return l.Items })
		}, FromDaemonSet),
		kindList(GKControllerRevision, "ControllerRevisions"+in, func(ctx context.Context) ([]appsv1.ControllerRevision, error) {
			l, err := apps.ControllerRevisions(ns).List(ctx, opts)
			return itemsOf(l, err, func(l *appsv1.ControllerRevisionList) []appsv1.ControllerRevision { return l.Items })
		}, FromControllerRevision),
		kindList(GKJob, "Jobs"+in, func(ctx context.Context) ([]batchv1.Job, error) {
			l, err := batch.Jobs(ns).List(ctx, opts)
			return itemsOf(l, err, func(l *batchv1.JobList) []batchv1.Job { return l.Items })
		}, FromJob),
		kindList(GKCronJob, "CronJobs"+in, func(ctx context.Context) ([]batchv1.CronJob, error) {
			l, err := batch.CronJobs(ns).List(ctx, opts)
			return itemsOf(l, err, func(l *batchv1.CronJobList) []batchv1.CronJob { return l.Items })
		}, FromCronJob),
		kindList(GKPod, "Pods"+in, func(ctx context.Context) ([]corev1.Pod, error) {
			l, err := corev.Pods(ns).List(ctx, opts)
			return itemsOf(l, err, func(l *corev1.PodList) []corev1.Pod { return l.Items })
		}, FromPod),
		func(ctx context.Context) (listed, error) {
			list, err := l.Dynamic.Resource(core.RolloutGVR).Namespace(ns).List(ctx, opts)
			switch {
			case apierrors.IsNotFound(err): // no Rollout CRD: no Rollouts (the kind still counts as listed)
				return listed{gk: GKRollout}, nil
			case err != nil:
				return listed{}, listErr("listing Rollouts in "+ns, err)
			}
			ws := make([]Workload, len(list.Items))
			for i := range list.Items {
				w, err := FromRollout(&list.Items[i])
				if err != nil {
					return listed{}, fmt.Errorf("decoding Rollout %s/%s: %w", ns, list.Items[i].GetName(), err)
				}
				ws[i] = w
			}
			return listed{GKRollout, ws}, nil
		},
	}
}

// listed is one kind's workloads in LiveSource.Snapshot.
type listed struct {
	gk schema.GroupKind
	ws []Workload
}

// kindList is the list of one workload kind for LiveSource.Snapshot: list reads the
// items ("what" names them in an error), from converts each.
func kindList[T any](gk schema.GroupKind, what string, list func(context.Context) ([]T, error), from func(*T) Workload) func(context.Context) (listed, error) {
	return func(ctx context.Context) (listed, error) {
		items, err := list(ctx)
		if err != nil {
			return listed{}, listErr("listing "+what, err)
		}
		ws := make([]Workload, len(items))
		for i := range items {
			ws[i] = from(&items[i])
		}
		return listed{gk, ws}, nil
	}
}

// itemsOf returns the items of a typed list answer, or its error.
func itemsOf[L, T any](l *L, err error, items func(*L) []T) ([]T, error) {
	if err != nil {
		return nil, err
	}
	return items(l), nil
}

// listErr wraps a failed list: a *core.PermanentError when the apiserver refused it
// for good (RBAC, see core.IsPermanent), else core.ErrUnavailable.
func listErr(what string, err error) error {
	if core.IsPermanent(err) {
		return &core.PermanentError{Object: what, Cause: err}
	}
	return fmt.Errorf("%s: %w: %w", what, core.ErrUnavailable, err)
}
