package cache

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Index names of the cache's informers.
const (
	// UsesIndex maps core.UsesKey of a config object to the objects that use it
	// (core.UsesKeys): on the ReplicaSet, ControllerRevision, StatefulSet, DaemonSet,
	// Job, CronJob, Pod, Deployment and Rollout informers.
	UsesIndex = "configmap-attacher.io/uses"
	// ControllerIndex maps a controller's UID to the ReplicaSets it controls.
	ControllerIndex = "configmap-attacher.io/controller"
	// WorkloadRefIndex maps "namespace/name" of a Deployment to the Rollouts whose
	// spec.workloadRef names it.
	WorkloadRefIndex = "configmap-attacher.io/workload-ref"
)

// usesIndexFunc reads a record's keys (computed when it was stored) or, for a Rollout,
// computes them.
func usesIndexFunc(obj any) ([]string, error) {
	if r, ok := obj.(*record); ok {
		return r.uses(), nil
	}
	return core.UsesKeys(obj), nil
}

func controllerIndexFunc(obj any) ([]string, error) {
	if m, ok := obj.(metav1.Object); ok {
		if c := metav1.GetControllerOfNoCopy(m); c != nil {
			return []string{string(c.UID)}, nil
		}
	}
	return nil, nil
}

func workloadRefIndexFunc(obj any) ([]string, error) {
	if ro, ok := obj.(*unstructured.Unstructured); ok {
		if kind, name := core.RolloutWorkloadRef(ro); kind == "Deployment" && name != "" {
			return []string{ro.GetNamespace() + "/" + name}, nil
		}
	}
	return nil, nil
}

// addUserInformers creates the informers the uses index needs besides the ReplicaSet
// and Deployment ones (which New made), adds the indexes and registers their sync.
func (c *Cache) addUserInformers() error {
	apps, batch := c.typed.Apps().V1(), c.typed.Batch().V1()
	sts, ds, jobs := apps.StatefulSets().Informer(), apps.DaemonSets().Informer(), batch.Jobs().Informer()
	c.userInfs = []toolscache.SharedIndexInformer{
		apps.ControllerRevisions().Informer(), sts, ds, jobs, batch.CronJobs().Informer(), c.typed.Core().V1().Pods().Informer(),
	}
	rs, dep := apps.ReplicaSets().Informer(), apps.Deployments().Informer()
	c.podControllers = map[schema.GroupKind]toolscache.SharedIndexInformer{
		{Group: "apps", Kind: "ReplicaSet"}: rs, {Group: "apps", Kind: "StatefulSet"}: sts,
		{Group: "apps", Kind: "DaemonSet"}: ds, {Group: "batch", Kind: "Job"}: jobs,
	}
	if err := rs.AddIndexers(toolscache.Indexers{UsesIndex: usesIndexFunc, ControllerIndex: controllerIndexFunc}); err != nil {
		return fmt.Errorf("cache: ReplicaSet indexes: %w", err)
	}
	if _, err := rs.AddEventHandler(c.arrivals.handler()); err != nil {
		return fmt.Errorf("cache: ReplicaSet arrivals: %w", err)
	}
	c.synced = append(c.synced, rs.HasSynced)
	for _, inf := range append([]toolscache.SharedIndexInformer{dep}, c.userInfs...) {
		if err := inf.AddIndexers(toolscache.Indexers{UsesIndex: usesIndexFunc}); err != nil {
			return fmt.Errorf("cache: uses index: %w", err)
		}
	}
	// The Deployment informer starts on demand (lazyListers), the user informers too (lazyUsers).
	if _, err := rs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: c.noteController,
		UpdateFunc: func(_, obj any) { c.noteController(obj) }}); err != nil {
		return fmt.Errorf("cache: ReplicaSet controllers: %w", err)
	}
	c.rsInf, c.depInf = rs, dep
	return nil
}

// Users implements core.Reader from the uses indexes. Before every informer has synced
// (the user informers start with the first call: lazyUsers), or for a namespace outside
// the cache's, it reads live (core.LiveReader.Users): a partial answer could leave a user
// unprotected.
func (c *Cache) Users(ctx context.Context, kind core.Kind, namespace, name string) (*core.Users, error) {
	if !c.inScope(namespace) || !c.HasSynced() || !c.usersReady() {
		c.miss("users")
		return core.LiveReader{Client: c.clients.Kube, Dynamic: c.clients.Dynamic, Metadata: c.clients.Metadata}.Users(ctx, kind, namespace, name)
	}
	key := core.UsesKey(kind, namespace, name)
	u := &core.Users{}
	for _, inf := range append([]toolscache.SharedIndexInformer{c.rsInf, c.depInf}, c.userInfs...) {
		if err := addAll(u, inf.GetIndexer(), UsesIndex, key); err != nil {
			return nil, err
		}
	}
	var referring []*unstructured.Unstructured
	if inf := c.rollouts.Load(); inf != nil {
		idx := (*inf).GetIndexer()
		if err := addAll(u, idx, UsesIndex, key); err != nil {
			return nil, err
		}
		for _, d := range u.Deployments {
			objs, err := idx.ByIndex(WorkloadRefIndex, namespace+"/"+d.Name)
			if err != nil {
				return nil, err
			}
			for _, o := range objs {
				referring = append(referring, o.(*unstructured.Unstructured))
			}
		}
	}
	for uid := range core.WorkloadUIDs(u.Deployments, u.Rollouts, referring) {
		objs, err := c.rsInf.GetIndexer().ByIndex(ControllerIndex, string(uid))
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			rs, err := Decode(o)
			if err != nil {
				return nil, err
			}
			if !core.Uses(rs, kind, name) {
				u.Add(rs)
			}
		}
	}
	if !c.podControllersCached(u) {
		c.miss("users")
		return core.LiveReader{Client: c.clients.Kube, Dynamic: c.clients.Dynamic, Metadata: c.clients.Metadata}.Users(ctx, kind, namespace, name)
	}
	return u, nil
}

// podControllersCached reports whether the cache holds the controller of every Pod in u
// that a ReplicaSet, StatefulSet, DaemonSet or Job controls. Each informer has its own
// watch, and the Pod informer starts later than the ReplicaSet one (lazyUsers) with a
// fresh list: it can hold a new ReplicaSet's Pods before the ReplicaSet informer holds
// the ReplicaSet. Such an answer is partial: the Pod would become an owner although its
// controller covers it (docs/safety.md, "Every user protects a revision"), so Users
// reads live instead. The same holds when the controller is cached but the answer still
// makes its Pod an owner: the StatefulSet or DaemonSet informer can hold the previous
// template, and the ControllerRevision informer not yet the new revision, while the Pod
// informer holds a Pod of the new template. A live answer (Pods listed first) has both.
func (c *Cache) podControllersCached(u *core.Users) bool {
	for _, o := range u.Owners() {
		if o.Kind == "Pod" && c.controlledPod(u, o.UID) {
			return false
		}
	}
	for _, p := range u.Pods {
		ref := metav1.GetControllerOfNoCopy(p)
		if ref == nil {
			continue
		}
		inf := c.podControllers[schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).GroupKind()]
		if inf == nil {
			continue
		}
		if m, ok := cached(inf, p.Namespace, ref.Name).(metav1.Object); !ok || m.GetUID() != ref.UID {
			return false
		}
	}
	return true
}

// controlledPod reports whether the Pod of u with uid has a controller of a kind in
// c.podControllers.
func (c *Cache) controlledPod(u *core.Users, uid types.UID) bool {
	for _, p := range u.Pods {
		if p.UID != uid {
			continue
		}
		ref := metav1.GetControllerOfNoCopy(p)
		return ref != nil && c.podControllers[schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind).GroupKind()] != nil
	}
	return false
}

// addAll adds to u the decoded objects of idx under index key.
func addAll(u *core.Users, idx toolscache.Indexer, index, key string) error {
	objs, err := idx.ByIndex(index, key)
	if err != nil {
		return err
	}
	for _, o := range objs {
		d, err := Decode(o)
		if err != nil {
			return err
		}
		u.Add(d)
	}
	return nil
}
