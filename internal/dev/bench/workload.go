package bench

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dev/bench/fixture"
)

// ensureNamespace creates ns if it does not exist.
func (e *env) ensureNamespace(ctx context.Context, ns string) error {
	_, err := e.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	return nil
}

// parallel runs f(i) for i in [from, to) on workers goroutines; the first error wins.
func parallel(ctx context.Context, from, to, workers int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	next.Store(int64(from))
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// revision returns an opted-in ConfigMap with data bytes of payload.
func revision(ns, name string, data int, labels map[string]string) *corev1.ConfigMap {
	l := map[string]string{core.LabelRevision: "true"}
	for k, v := range labels {
		l[k] = v
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: l},
		Data: map[string]string{"config.yaml": "revision: " + name + "\n"}}
	if data > 0 {
		cm.Data["payload"] = strings.Repeat("x", data)
	}
	return cm
}

// createRevisions creates ConfigMaps prefix-from .. prefix-(to-1).
func (e *env) createRevisions(ctx context.Context, ns, prefix string, from, to, data int) error {
	return parallel(ctx, from, to, 16, func(ctx context.Context, i int) error {
		_, err := e.kc.CoreV1().ConfigMaps(ns).Create(ctx, revision(ns, fmt.Sprintf("%s-%d", prefix, i), data, nil), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ConfigMap %s/%s-%d: %w", ns, prefix, i, err)
		}
		return nil
	})
}

// replicaSet is fixture.ReplicaSet.
func replicaSet(ns, name, cm string) *appsv1.ReplicaSet { return fixture.ReplicaSet(ns, name, cm) }

// sample is one ReplicaSet's journey: created (before the Create call) and the first
// time a watch saw an ownerReference on its ConfigMap.
type sample struct {
	created, created2, seen time.Time
}

// tracker watches the ConfigMaps of a namespace and records when each gets its first
// ReplicaSet ownerReference.
type tracker struct {
	mu      sync.Mutex
	samples map[string]*sample // ConfigMap name -> sample
	changed chan struct{}
	stop    context.CancelFunc
}

// newTracker returns a tracker fed by its caller's observe (no watch).
func newTracker() *tracker {
	return &tracker{samples: map[string]*sample{}, changed: make(chan struct{}, 1), stop: func() {}}
}

// track starts a ConfigMap watch in ns and returns once it is synced.
func (e *env) track(ctx context.Context, ns string) (*tracker, error) {
	ctx, cancel := context.WithCancel(ctx)
	t := newTracker()
	t.stop = cancel
	f := informers.NewSharedInformerFactoryWithOptions(e.kc, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().ConfigMaps().Informer()
	on := func(obj any) {
		cm, ok := obj.(*corev1.ConfigMap)
		if !ok {
			return
		}
		for _, o := range cm.OwnerReferences {
			if o.Kind == "ReplicaSet" {
				t.observe(cm.Name)
				return
			}
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: on, UpdateFunc: func(_, n any) { on(n) }}); err != nil {
		cancel()
		return nil, fmt.Errorf("tracker: %w", err)
	}
	f.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("tracker: ConfigMap watch in %s did not sync: %w", ns, ctx.Err())
	}
	return t, nil
}

func (t *tracker) observe(cm string) {
	now := time.Now()
	t.mu.Lock()
	s := t.samples[cm]
	if s == nil {
		s = &sample{}
		t.samples[cm] = s
	}
	if s.seen.IsZero() {
		s.seen = now
	}
	t.mu.Unlock()
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// expect registers that the ReplicaSet for cm is about to be created.
func (t *tracker) expect(cm string) *sample {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.samples[cm]
	if s == nil {
		s = &sample{}
		t.samples[cm] = s
	}
	s.created = now
	return s
}

func (t *tracker) created(s *sample) {
	t.mu.Lock()
	s.created2 = time.Now()
	t.mu.Unlock()
}

// wait waits until every name has been seen or settle passes without progress.
func (t *tracker) wait(ctx context.Context, names []string, settle time.Duration) {
	deadline := time.Now().Add(settle)
	lastMissing := -1
	for {
		missing := 0
		t.mu.Lock()
		for _, n := range names {
			if s := t.samples[n]; s == nil || s.seen.IsZero() {
				missing++
			}
		}
		t.mu.Unlock()
		if missing == 0 {
			return
		}
		if missing != lastMissing {
			lastMissing, deadline = missing, time.Now().Add(settle)
		}
		if time.Now().After(deadline) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.changed:
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// result summarises the samples of names.
func (t *tracker) result(names []string) runResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	var r runResult
	var lat []float64
	var first, lastCreated, lastSeen time.Time
	for _, n := range names {
		s := t.samples[n]
		if s == nil || s.created.IsZero() {
			continue
		}
		r.N++
		if first.IsZero() || s.created.Before(first) {
			first = s.created
		}
		if s.created2.After(lastCreated) {
			lastCreated = s.created2
		}
		if s.seen.IsZero() {
			r.Lost++
			continue
		}
		if s.seen.After(lastSeen) {
			lastSeen = s.seen
		}
		lat = append(lat, ms(s.seen.Sub(s.created)))
	}
	r.Latency = percentiles(lat)
	if d := lastCreated.Sub(first).Seconds(); d > 0 {
		r.CreateRate = float64(r.N) / d
	}
	if d := lastSeen.Sub(first).Seconds(); d > 0 {
		r.AttachRate = float64(r.N-r.Lost) / d
	}
	if !lastSeen.IsZero() && !lastCreated.IsZero() {
		r.DrainMs = math.Max(0, ms(lastSeen.Sub(lastCreated)))
	}
	return r
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Latency holds percentiles in milliseconds.
type Latency struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50Ms"`
	P95 float64 `json:"p95Ms"`
	P99 float64 `json:"p99Ms"`
	Max float64 `json:"maxMs"`
}

func (l Latency) String() string {
	if l.N == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%s / %s / %s", fmtMs(l.P50), fmtMs(l.P95), fmtMs(l.P99))
}

func fmtMs(v float64) string {
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.0fs", v/1000)
	case v >= 1000:
		return fmt.Sprintf("%.2fs", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	default:
		return fmt.Sprintf("%.1fms", v)
	}
}

func percentiles(v []float64) Latency {
	if len(v) == 0 {
		return Latency{}
	}
	sort.Float64s(v)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(v)))) - 1
		if i < 0 {
			i = 0
		}
		return v[i]
	}
	return Latency{N: len(v), P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: v[len(v)-1]}
}

// runResult is one run of ReplicaSet creations on one path.
type runResult struct {
	N    int `json:"n"`
	Lost int `json:"lost"`
	// Latency from just before the ReplicaSet's Create call to the watch seeing the
	// ownerReference.
	Latency Latency `json:"latency"`
	// CreateRate is ReplicaSets created per second (first Create call to the last
	// returning); AttachRate ownerReferences seen per second over first Create to last
	// seen; DrainMs how long after the last Create the last ownerReference appeared.
	CreateRate float64 `json:"createRate"`
	AttachRate float64 `json:"attachRate"`
	DrainMs    float64 `json:"drainMs"`
}

// createPaced creates n ReplicaSets (prefix-i, each referencing cmPrefix-i) at rate per
// second (rate <= 0: as fast as workers allow) and waits for their ownerReferences.
func (e *env) createReplicaSets(ctx context.Context, t *tracker, ns, prefix, cmPrefix string, from, to int, rate float64, workers int) ([]string, error) {
	names := make([]string, 0, to-from)
	for i := from; i < to; i++ {
		names = append(names, fmt.Sprintf("%s-%d", cmPrefix, i))
	}
	start := time.Now()
	create := func(ctx context.Context, i int) error {
		cm := fmt.Sprintf("%s-%d", cmPrefix, i)
		s := t.expect(cm)
		if _, err := e.kc.AppsV1().ReplicaSets(ns).Create(ctx, replicaSet(ns, fmt.Sprintf("%s-%d", prefix, i), cm), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating ReplicaSet %s/%s-%d: %w", ns, prefix, i, err)
		}
		t.created(s)
		return nil
	}
	var err error
	if rate <= 0 {
		err = parallel(ctx, from, to, workers, create)
	} else {
		// Paced: the i-th creation starts at start + i/rate, on its own goroutine, so a
		// slow Create does not delay the next (bounded at 64 in flight).
		sem := make(chan struct{}, 64)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := from; i < to && ctx.Err() == nil; i++ {
			at := start.Add(time.Duration(float64(i-from) / rate * float64(time.Second)))
			if d := time.Until(at); d > 0 {
				time.Sleep(d)
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				if cerr := create(ctx, i); cerr != nil {
					mu.Lock()
					if err == nil {
						err = cerr
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	if err != nil {
		return names, err
	}
	t.wait(ctx, names, e.cfg.Settle)
	return names, ctx.Err()
}
