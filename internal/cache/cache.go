// Package cache is an informer-backed core.Reader for long-running paths (the trigger
// service, the watcher, the orphan sweep). ReplicaSets, Deployments and the other
// workloads come from typed informers, Argo Rollouts from a dynamic one once the CRD
// exists, and ConfigMaps and Secrets from metadata-only informers: client-go's plain
// informers, each with one fanout of handlers (lightInformer). ReplicaSets and config
// objects are watched from the start; Deployments and Rollouts (lazyListers) and the
// other workloads (lazyUsers) once the cluster needs them.
// Every object is stored lean (see Lean): the metadata the core, the sweep and status
// read and its pod template reduced to its references, in a record of the cache's own
// (record.go) that keeps the metadata and the rest as protobuf, and the initial lists are
// read page by page (pagedLeanList), so memory follows the object count, not the templates.
// A uses index on every workload informer maps a config object to the objects that use
// it (core.Reader.Users); the sweep reads whole namespaces (gc.Store, sweep.go).
//
// A cache miss falls back to a live GET (a ReplicaSet announced by an event may be
// newer than the cache), so the Reader is always correct and costs no request in the
// common case; a ReplicaSet announced before the informer delivered it can be waited
// for instead (AwaitReplicaSet, bounded). Every object returned is decoded from the
// stored record: the caller's own copy.
package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// Options configure a Cache.
type Options struct {
	// Namespace limits every informer to one namespace; empty means all namespaces.
	Namespace string
	// Secrets enables the Secret metadata informer. Without it, Secret metadata is read
	// live (and only when the service allows Secrets at all).
	Secrets bool
	// Resync is the informers' resync period; zero means none.
	Resync time.Duration
	// RolloutPoll is how often to look for the Argo Rollouts CRD while it is absent;
	// zero means 30s.
	RolloutPoll time.Duration
	// ReplicaSetWait bounds AwaitReplicaSet: how long an event that outran the
	// ReplicaSet informer waits for it (docs/design.md, "The live confirm"). Zero means
	// DefaultReplicaSetWait; negative: no waiting (the core reads such a ReplicaSet live).
	ReplicaSetWait time.Duration
	// Logger receives the cache's logs; nil means slog.Default().
	Logger *slog.Logger
}

// Cache implements core.Reader from shared informers. Create it with New, start it
// with Run; it is safe for concurrent use.
type Cache struct {
	clients *kube.Clients
	opts    Options
	log     *slog.Logger

	typed informers.SharedInformerFactory

	rsInf  toolscache.SharedIndexInformer
	depInf toolscache.SharedIndexInformer
	// userInfs are the ControllerRevision, StatefulSet, DaemonSet, Job, CronJob and Pod
	// informers, lean (see Lean) and indexed by the config objects they use.
	userInfs []toolscache.SharedIndexInformer
	users    lazyUsers
	// podControllers are the informers of the controllers whose Pods Users may cover,
	// by group and kind (podControllersCached).
	podControllers map[schema.GroupKind]toolscache.SharedIndexInformer
	// workloadInfs are every typed informer (registerPagedInformers): Run runs them.
	workloadInfs []toolscache.SharedIndexInformer
	cmInf        toolscache.SharedIndexInformer
	secInf       toolscache.SharedIndexInformer
	synced       []toolscache.InformerSynced

	rollouts     atomic.Pointer[toolscache.SharedIndexInformer] // once started (lazyListers)
	listers      lazyListers
	absentMu     sync.Mutex
	absentAt     time.Time // when the Argo Rollouts API was last confirmed absent
	running      atomic.Bool
	hasSyncedAll atomic.Bool

	misses   counters // by resource
	waits    counters // AwaitReplicaSet's, by outcome
	arrivals arrivals // the ReplicaSet informer's adds and updates, for AwaitReplicaSet
}

var (
	_ core.Reader            = (*Cache)(nil)
	_ core.ReplicaSetCache   = (*Cache)(nil)
	_ core.ReplicaSetAwaiter = (*Cache)(nil)
)

// New builds the informers (nothing is started). clients must carry Kube, Dynamic and
// Metadata clients.
func New(clients *kube.Clients, opts Options) (*Cache, error) {
	if clients == nil || clients.Kube == nil || clients.Dynamic == nil || clients.Metadata == nil {
		return nil, errors.New("cache: Kube, Dynamic and Metadata clients are required")
	}
	if opts.RolloutPoll == 0 {
		opts.RolloutPoll = 30 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Cache{clients: clients, opts: opts, log: log.With("component", "cache")}
	// Every typed informer is a paged one (registerPagedInformers) whose list and watch
	// deliver the stored records (toRecord): the factory needs no transform, and its
	// Listers cannot be used (they expect Kubernetes types; reads go through cached).
	c.typed = informers.NewSharedInformerFactoryWithOptions(clients.Kube, opts.Resync, informers.WithNamespace(opts.Namespace))
	lc, err := listClient(clients)
	if err != nil {
		return nil, err
	}
	c.registerPagedInformers(lc)

	if err := c.addUserInformers(); err != nil {
		return nil, err
	}
	if err := c.addListedIndex(); err != nil {
		return nil, fmt.Errorf("cache: listed index: %w", err)
	}

	cm, err := c.newConfigInformer(core.ConfigMapGVR)
	if err != nil {
		return nil, err
	}
	c.cmInf = cm
	c.synced = append(c.synced, c.cmInf.HasSynced)
	if opts.Secrets {
		if c.secInf, err = c.newConfigInformer(core.SecretGVR); err != nil {
			return nil, err
		}
		c.synced = append(c.synced, c.secInf.HasSynced)
	}
	return c, nil
}

// listClient is the typed client the informers list and watch with: protobuf (cheaper
// to decode than JSON, which matters for a start-up list of every workload) when
// clients carries a rest.Config that does not choose a content type, else clients.Kube.
func listClient(clients *kube.Clients) (kubernetes.Interface, error) {
	if clients.Config == nil || clients.Config.ContentType != "" {
		return clients.Kube, nil
	}
	pc := rest.CopyConfig(clients.Config)
	pc.ContentType = "application/vnd.kubernetes.protobuf"
	pc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	kc, err := kubernetes.NewForConfig(pc)
	if err != nil {
		return nil, fmt.Errorf("cache: list client: %w", err)
	}
	return kc, nil
}

// StripManagedFields is the informers' transform: it drops metadata.managedFields,
// which the core never reads and which can be most of an object's size. It returns
// other values unchanged.
func StripManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// Run starts the ReplicaSet and config object informers and blocks until ctx ends; the
// others start on demand (lazyListers, lazyUsers), the Argo Rollouts one only once the
// rollouts.argoproj.io resource is served (checked now, then every Options.RolloutPoll).
// Run returns nil when ctx ends.
//
// An idle cache costs as few goroutines as client-go allows (docs/design.md, "Per-cluster
// cost"): every informer runs on ctx itself (the factory's Start would run each on a
// context made from ctx.Done(), a goroutine more each), Run's own goroutine runs the
// first informer, and the look for the Argo Rollouts API is a timer, not a goroutine.
func (c *Cache) Run(ctx context.Context) error {
	if !c.running.CompareAndSwap(false, true) {
		return errors.New("cache: Run called twice")
	}
	eager := c.eager()
	var wg sync.WaitGroup
	for _, inf := range eager[1:] {
		wg.Go(func() { inf.RunWithContext(ctx) })
	}
	defer wg.Wait()
	defer c.runUsers(ctx)() // the user informers start on demand (lazyUsers)
	poll := c.runListers(ctx)
	defer poll.Stop()
	defer c.endListers()         // before the timer's Stop: a look under way re-arms it no more
	eager[0].RunWithContext(ctx) // returns once ctx has ended
	return nil
}

// HasSynced reports whether every informer Run starts at once has completed its initial
// list (those started on demand, lazyUsers and lazyListers, are waited for by the reads
// that need them). It is what /readyz reports.
func (c *Cache) HasSynced() bool {
	if c.hasSyncedAll.Load() {
		return true
	}
	for _, s := range c.synced {
		if !s() {
			return false
		}
	}
	c.hasSyncedAll.Store(true)
	return true
}

// WaitForSync blocks until HasSynced or ctx ends (then it returns ctx's error).
func (c *Cache) WaitForSync(ctx context.Context) error {
	if !toolscache.WaitForCacheSync(ctx.Done(), c.HasSynced) {
		return fmt.Errorf("waiting for informer caches: %w", context.Cause(ctx))
	}
	return nil
}

// Misses returns how many reads of resource ("replicasets", "deployments", "rollouts",
// "configmaps", "secrets") fell back to a live GET, and ("users") how many Users answers
// were read live (before the informers synced, or outside the cache's namespace).
func (c *Cache) Misses(resource string) int64 { return c.misses.get(resource) }

func (c *Cache) miss(resource string) { c.misses.add(resource) }

// inScope reports whether namespace is watched by the informers.
func (c *Cache) inScope(namespace string) bool {
	return c.opts.Namespace == "" || c.opts.Namespace == namespace
}

// ReplicaSet implements core.Reader: the cached ReplicaSet, else a live GET.
func (c *Cache) ReplicaSet(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error) {
	if c.inScope(namespace) {
		if rs, ok := cached(c.rsInf, namespace, name).(*appsv1.ReplicaSet); ok {
			return rs, nil
		}
	}
	c.miss("replicasets")
	return c.clients.Kube.AppsV1().ReplicaSets(namespace).Get(ctx, name, metav1.GetOptions{})
}

// CachedReplicaSet implements core.ReplicaSetCache: the cached ReplicaSet, or ok false
// (counted as a miss; the caller waits for it, AwaitReplicaSet, or reads it live).
func (c *Cache) CachedReplicaSet(namespace, name string) (*appsv1.ReplicaSet, bool) {
	if c.inScope(namespace) {
		if rs, ok := cached(c.rsInf, namespace, name).(*appsv1.ReplicaSet); ok {
			return rs, true
		}
	}
	c.miss("replicasets")
	return nil, false
}

// Deployment implements core.Reader: the cached Deployment, else a live GET.
func (c *Cache) Deployment(ctx context.Context, namespace, name string) (*appsv1.Deployment, error) {
	if c.inScope(namespace) {
		if d, ok := cached(c.depInf, namespace, name).(*appsv1.Deployment); ok {
			return d, nil
		}
	}
	c.miss("deployments")
	c.wantListers()
	return c.clients.Kube.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
}

// Rollout implements core.Reader: the cached Rollout, else a live GET (which answers
// NotFound while the Argo Rollouts CRD is not installed).
func (c *Cache) Rollout(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error) {
	if inf := c.rollouts.Load(); inf != nil && c.inScope(namespace) {
		if u, ok := cached(*inf, namespace, name).(*unstructured.Unstructured); ok {
			return u, nil // Decode's own copy
		}
	}
	c.miss("rollouts")
	c.wantListers()
	return c.clients.Dynamic.Resource(core.RolloutGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// ObjectMeta implements core.Reader: the cached metadata of a ConfigMap or Secret, else
// a live metadata-only GET.
func (c *Cache) ObjectMeta(ctx context.Context, kind core.Kind, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	inf := c.cmInf
	if kind == core.KindSecret {
		inf = c.secInf
	}
	if inf != nil && c.inScope(namespace) {
		if m, ok := cached(inf, namespace, name).(*metav1.PartialObjectMetadata); ok {
			return m, nil
		}
	}
	gvr := kind.GVR()
	c.miss(gvr.Resource)
	return c.clients.Metadata.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// cached returns the decoded object namespace/name of inf's store (Decode), nil when
// it is not there or does not decode.
func cached(inf toolscache.SharedIndexInformer, namespace, name string) any {
	obj, ok, err := inf.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	o, err := Decode(obj)
	if err != nil {
		return nil
	}
	return o
}

// GVRs lists the resources the cache lists and watches (for RBAC documentation).
func GVRs(secrets bool) []schema.GroupVersionResource {
	out := []schema.GroupVersionResource{
		{Group: "apps", Version: "v1", Resource: "replicasets"},
		{Group: "apps", Version: "v1", Resource: "deployments"},
		core.RolloutGVR, core.ConfigMapGVR,
		{Group: "apps", Version: "v1", Resource: "controllerrevisions"},
		{Group: "apps", Version: "v1", Resource: "statefulsets"},
		{Group: "apps", Version: "v1", Resource: "daemonsets"},
		{Group: "batch", Version: "v1", Resource: "jobs"},
		{Group: "batch", Version: "v1", Resource: "cronjobs"},
		{Version: "v1", Resource: "pods"},
	}
	if secrets {
		out = append(out, core.SecretGVR)
	}
	return out
}
