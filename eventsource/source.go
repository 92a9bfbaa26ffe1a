package eventsource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// SourceOptions configure a Source.
type SourceOptions struct {
	// EventSourceName and EventName name the subject default.<EventSourceName>.<EventName>,
	// as an Argo Events EventSource with that name and event would.
	EventSourceName, EventName string
	// Metadata is attached to every event (for example {"cluster": "east"}).
	Metadata map[string]string
	// Namespace limits the watch to one namespace; empty means all.
	Namespace string
	// LabelSelector filters ReplicaSets (as the resource EventSource's label filter).
	LabelSelector string
	// Workers publish concurrently; default 4.
	Workers int
	Logger  *slog.Logger
}

// Source publishes an ADD event for every ReplicaSet, existing ones at start included
// (as Argo Events' resource EventSource relists on start), to an EventBus, so Sensors and
// the EventBus subscription work where Argo Events' EventSource is not installed. Failed
// publishes are retried with backoff; nothing is dropped while the process runs.
type Source struct {
	kc   kubernetes.Interface
	pub  *Publisher
	opts SourceOptions
	log  *slog.Logger

	mu        sync.Mutex
	published int64
}

// NewSource returns a Source reading ReplicaSets through kc and publishing through pub.
func NewSource(kc kubernetes.Interface, pub *Publisher, opts SourceOptions) (*Source, error) {
	if kc == nil || pub == nil {
		return nil, errors.New("eventsource: NewSource needs a client and a publisher")
	}
	if opts.EventSourceName == "" || opts.EventName == "" {
		return nil, errors.New("eventsource: the EventSource name and event name are required")
	}
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	pub.EventSourceName, pub.EventName, pub.Metadata = opts.EventSourceName, opts.EventName, opts.Metadata
	return &Source{kc: kc, pub: pub, opts: opts, log: opts.Logger.With("component", "eventsource")}, nil
}

// Published returns how many events were published.
func (s *Source) Published() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.published
}

// Run watches ReplicaSets and publishes until ctx ends; it returns nil on shutdown.
func (s *Source) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(s.kc, 0, informers.WithNamespace(s.opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = s.opts.LabelSelector }))
	inf := factory.Apps().V1().ReplicaSets().Informer()
	// The queue holds keys with the object to publish; a key is published once per ADD.
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[*appsv1.ReplicaSet](),
		workqueue.TypedRateLimitingQueueConfig[*appsv1.ReplicaSet]{Name: "configmap-attacher-eventsource"})
	defer queue.ShutDown()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if rs, ok := obj.(*appsv1.ReplicaSet); ok {
			queue.Add(rs)
		}
	}}); err != nil {
		return fmt.Errorf("eventsource: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	s.log.Info("publishing ReplicaSet ADD events", "subject", s.pub.Subject(), "namespace", s.opts.Namespace,
		"labelSelector", s.opts.LabelSelector)
	var wg sync.WaitGroup
	for i := 0; i < s.opts.Workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				rs, quit := queue.Get()
				if quit {
					return
				}
				pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
				err := s.pub.Publish(pctx, "ADD", rs)
				cancel()
				if err != nil {
					s.log.Warn("publish failed; retrying", "namespace", rs.Namespace, "name", rs.Name, "err", err)
					queue.AddRateLimited(rs)
				} else {
					queue.Forget(rs)
					s.mu.Lock()
					s.published++
					s.mu.Unlock()
				}
				queue.Done(rs)
			}
		}()
	}
	<-ctx.Done()
	queue.ShutDownWithDrain()
	wg.Wait()
	return nil
}
