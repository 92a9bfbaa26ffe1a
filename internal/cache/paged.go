package cache

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// How many objects one page of an informer's initial list holds: at most this many
// objects are decoded at once (docs/design.md, "The cache representation"). A full
// workload is about 24 KiB decoded (a 3 KiB pod template), so a page of them is about
// 24 MiB; a ConfigMap's or Secret's metadata is about 1 KiB, so its pages are five
// times longer for about a fifth of that. Fewer pages matter more than their size:
// every page costs the apiserver a pass over the rest of the collection (etcd counts
// the remaining items; the watch cache walks the remaining keys), so a list costs about
// pages times objects.
const (
	pageSize     = 1000
	metaPageSize = 5000
)

// pagedLeanList returns a list function that reads the whole collection in pages of
// size objects, reducing each page with transform before the next is read, so that a
// start-up (or relist) never holds more than one page of full objects: the reflector's
// own list would decode the whole collection before the informer's transform runs. The
// pages are a consistent read (resourceVersion ""), which satisfies every
// resourceVersion the reflector may ask for; the result is a leanList at the list's
// resourceVersion, holding the reduced objects themselves (no copy).
func pagedLeanList(list toolscache.ListWithContextFunc, transform toolscache.TransformFunc, size int64) toolscache.ListWithContextFunc {
	return func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		opts.ResourceVersion, opts.ResourceVersionMatch, opts.Limit, opts.Continue = "", "", size, ""
		out := &leanList{}
		for {
			page, err := list(ctx, opts)
			if err != nil {
				return nil, err
			}
			objs, err := meta.ExtractList(page)
			if err != nil {
				return nil, fmt.Errorf("cache: reading a list page: %w", err)
			}
			for _, o := range objs {
				lean, err := transform(o)
				if err != nil {
					return nil, err
				}
				out.Items = append(out.Items, lean.(runtime.Object))
			}
			lm, err := meta.ListAccessor(page)
			if err != nil {
				return nil, err
			}
			if out.ResourceVersion == "" {
				out.ResourceVersion = lm.GetResourceVersion()
			}
			if opts.Continue = lm.GetContinue(); opts.Continue == "" {
				return out, nil
			}
		}
	}
}

// leanList is what pagedLeanList returns: the reflector reads its ListMeta and Items.
type leanList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []runtime.Object
}

// DeepCopyObject implements runtime.Object.
func (l *leanList) DeepCopyObject() runtime.Object {
	out := &leanList{TypeMeta: l.TypeMeta, ListMeta: *l.ListMeta.DeepCopy(), Items: make([]runtime.Object, len(l.Items))}
	for i, o := range l.Items {
		out.Items[i] = o.DeepCopyObject()
	}
	return out
}

// leanWatch reduces every object a watch delivers with transform, so the informer
// receives lean objects from its list and its watch alike (and needs no transform of
// its own: each object is reduced once).
func leanWatch(w toolscache.WatchFuncWithContext, transform toolscache.TransformFunc) toolscache.WatchFuncWithContext {
	return func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		wi, err := w(ctx, opts)
		if err != nil {
			return nil, err
		}
		out := make(chan watch.Event)
		pw := watch.NewProxyWatcher(out)
		go relayLean(wi, pw, out, transform)
		return pw, nil
	}
}

// relayLean sends every event of in, reduced, to out until in ends or pw is stopped,
// then stops in and closes out. watch.Filter is not used: its goroutine blocks for
// good on an event it holds once the reader has stopped (the reflector stops reading,
// then calls Stop, at every watch it ends itself: a stop, a cluster removed, an
// expired resourceVersion), one goroutine and one object leaked each time.
func relayLean(in watch.Interface, pw *watch.ProxyWatcher, out chan<- watch.Event, transform toolscache.TransformFunc) {
	defer close(out)
	defer in.Stop()
	for {
		var e watch.Event
		var ok bool
		select {
		case <-pw.StopChan():
			return
		case e, ok = <-in.ResultChan():
			if !ok {
				return
			}
		}
		select {
		case <-pw.StopChan():
			return
		case out <- reduceEvent(e, transform):
		}
	}
}

// reduceEvent gives e's object the stored, lean form (an error event is passed as is).
func reduceEvent(e watch.Event, transform toolscache.TransformFunc) watch.Event {
	switch e.Type {
	case watch.Error:
		return e
	case watch.Bookmark:
		return bookmark(e, transform)
	}
	if lean, err := transform(e.Object); err == nil {
		if o, ok := lean.(runtime.Object); ok {
			e.Object = o
		}
	}
	return e
}

// bookmark gives a bookmark's object the stored type (the reflector drops an event of
// another type), keeping its resourceVersion and every annotation (the end of a watch
// list's initial events is one).
func bookmark(e watch.Event, transform toolscache.TransformFunc) watch.Event {
	lean, err := transform(e.Object)
	if err != nil {
		return e
	}
	o, ok := lean.(runtime.Object)
	from, err1 := meta.Accessor(e.Object)
	to, err2 := meta.Accessor(lean)
	if !ok || err1 != nil || err2 != nil {
		return e
	}
	to.SetResourceVersion(from.GetResourceVersion())
	to.SetAnnotations(from.GetAnnotations())
	e.Object = o
	return e
}

// listWatch is one kind's list and watch in the cache's namespace.
type listWatch struct {
	obj   runtime.Object
	list  toolscache.ListWithContextFunc
	watch toolscache.WatchFuncWithContext
}

func typedListWatches(kc kubernetes.Interface, ns string) []listWatch {
	apps, batch, corev := kc.AppsV1(), kc.BatchV1(), kc.CoreV1()
	return []listWatch{
		{&appsv1.ReplicaSet{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return apps.ReplicaSets(ns).List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return apps.ReplicaSets(ns).Watch(ctx, o)
			}},
		{&appsv1.Deployment{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return apps.Deployments(ns).List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return apps.Deployments(ns).Watch(ctx, o)
			}},
		{&appsv1.ControllerRevision{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return apps.ControllerRevisions(ns).List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return apps.ControllerRevisions(ns).Watch(ctx, o)
			}},
		{&appsv1.StatefulSet{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return apps.StatefulSets(ns).List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return apps.StatefulSets(ns).Watch(ctx, o)
			}},
		{&appsv1.DaemonSet{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return apps.DaemonSets(ns).List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return apps.DaemonSets(ns).Watch(ctx, o)
			}},
		{&batchv1.Job{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return batch.Jobs(ns).List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return batch.Jobs(ns).Watch(ctx, o)
			}},
		{&batchv1.CronJob{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return batch.CronJobs(ns).List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return batch.CronJobs(ns).Watch(ctx, o)
			}},
		{&corev1.Pod{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return corev.Pods(ns).List(ctx, o)
			},
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return corev.Pods(ns).Watch(ctx, o)
			}},
	}
}

// registerPagedInformers makes the typed factory build its workload informers on
// pagedLeanList with toRecord (registered under the Kubernetes type, storing records);
// it must run before any of them is asked for.
func (c *Cache) registerPagedInformers(kc kubernetes.Interface) {
	for _, lw := range typedListWatches(kc, c.opts.Namespace) {
		inf := c.typed.InformerFor(lw.obj, func(_ kubernetes.Interface, resync time.Duration) toolscache.SharedIndexInformer {
			return newPagedInformer(lw, &record{}, toRecord, pageSize, resync)
		})
		c.workloadInfs = append(c.workloadInfs, inf)
	}
}

// newPagedInformer is lw's informer on pagedLeanList (pages of size) and leanWatch with
// transform, whose results have the type of stored (the informer's example object).
func newPagedInformer(lw listWatch, stored runtime.Object, transform toolscache.TransformFunc, size int64, resync time.Duration) toolscache.SharedIndexInformer {
	return newLightInformer(&toolscache.ListWatch{ListWithContextFunc: pagedLeanList(lw.list, transform, size),
		WatchFuncWithContext: leanWatch(lw.watch, transform)}, stored, resync, nil)
}

// newConfigInformer is the metadata-only informer of ConfigMaps or Secrets, on
// pagedLeanList (pages of metaPageSize) with toMetaRecord.
func (c *Cache) newConfigInformer(gvr schema.GroupVersionResource) (toolscache.SharedIndexInformer, error) {
	rc := c.clients.Metadata.Resource(gvr).Namespace(c.opts.Namespace)
	inf := newPagedInformer(listWatch{obj: &metav1.PartialObjectMetadata{},
		list:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return rc.List(ctx, o) },
		watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return rc.Watch(ctx, o) },
	}, &metaRecord{}, toMetaRecord, metaPageSize, c.opts.Resync)
	return inf, nil
}

// newRolloutInformer is the informer of Argo Rollouts in the cache's namespace, each
// stored Lean (the transform of client-go's queue: a Rollout is read whole, without
// paging, as the dynamic informer factory would).
func (c *Cache) newRolloutInformer() toolscache.SharedIndexInformer {
	rc := c.clients.Dynamic.Resource(core.RolloutGVR).Namespace(c.opts.Namespace)
	return newLightInformer(&toolscache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return rc.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return rc.Watch(ctx, o) },
	}, &unstructured.Unstructured{}, c.opts.Resync, Lean)
}
