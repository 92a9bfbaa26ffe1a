package gc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// deletePlan is a plan of n Delete items (cm-000 ... in plan order) with a Keep item
// between each pair, so the report order interleaves deletes and non-deletes.
func deletePlan(n int) *Plan {
	p := &Plan{Namespace: "ns"}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("cm-%03d", i)
		p.Items = append(p.Items,
			Item{Namespace: "ns", Kind: core.KindConfigMap, Name: name, UID: types.UID("uid-" + name), ResourceVersion: fmt.Sprint(100 + i), Decision: Delete, Reason: "orphan"},
			Item{Namespace: "ns", Kind: core.KindConfigMap, Name: name + "-kept", UID: types.UID("uid-kept-" + name), ResourceVersion: "1", Decision: Keep})
	}
	return p
}

// slowDeletes makes every ConfigMap delete wait d, records the most deletes in flight
// at once and the preconditions each one carried, and answers fail(name) when non-nil.
type slowDeletes struct {
	d        time.Duration
	fail     func(name string) error
	inFlight atomic.Int64
	max      atomic.Int64
	mu       sync.Mutex
	pre      map[string]metav1.Preconditions
	calls    atomic.Int64
}

// ServeHTTP answers DELETE .../configmaps/NAME like an apiserver would (the fake
// clientset runs its reactors one at a time, so it cannot show concurrency).
func (s *slowDeletes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/configmaps/") {
		s.serveGet(w, path.Base(r.URL.Path))
		return
	}
	if r.Method != http.MethodDelete || !strings.Contains(r.URL.Path, "/configmaps/") {
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
		return
	}
	name := path.Base(r.URL.Path)
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.max.Load()
		if n <= m || s.max.CompareAndSwap(m, n) {
			break
		}
	}
	s.calls.Add(1)
	var opts metav1.DeleteOptions
	if err := json.NewDecoder(r.Body).Decode(&opts); err != nil {
		http.Error(w, "decoding DeleteOptions: "+err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	if opts.Preconditions != nil {
		s.pre[name] = *opts.Preconditions
	}
	s.mu.Unlock()
	time.Sleep(s.d)
	var status *apierrors.StatusError
	if s.fail != nil {
		if err := s.fail(name); err != nil {
			status = err.(*apierrors.StatusError)
		}
	}
	st := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess}
	code := http.StatusOK
	if status != nil {
		st = status.ErrStatus
		st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
		code = int(st.Code)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(st)
}

// serveGet answers the Executor's live confirm before each delete with the object
// deletePlan planned (cm-NNN: UID uid-cm-NNN, resourceVersion 100+NNN).
func (s *slowDeletes) serveGet(w http.ResponseWriter, name string) {
	var i int
	if _, err := fmt.Sscanf(name, "cm-%d", &i); err != nil {
		http.Error(w, "unexpected GET "+name, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "ns", "uid": "uid-" + name, "resourceVersion": fmt.Sprint(100 + i)}})
}

// newSlowClient is a real client-go clientset talking to s over HTTP, with a QPS
// limit high enough not to matter.
func newSlowClient(t *testing.T, s *slowDeletes) kubernetes.Interface {
	t.Helper()
	s.pre = map[string]metav1.Preconditions{}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: 10000, Burst: 10000,
		ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestExecuteParallelBoundOrderAndFailures(t *testing.T) {
	const n, bound = 40, 5
	gr := schema.GroupResource{Resource: "configmaps"}
	s := &slowDeletes{d: 20 * time.Millisecond, fail: func(name string) error {
		switch name {
		case "cm-003":
			return apierrors.NewInternalError(errors.New("etcd hiccup"))
		case "cm-007":
			return apierrors.NewConflict(gr, name, errors.New("precondition failed"))
		case "cm-011":
			return apierrors.NewNotFound(gr, name)
		}
		return nil
	}}
	rec := record.NewFakeRecorder(100)
	m, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &Executor{Cluster: "c1", Client: newSlowClient(t, s), Parallel: bound, Recorder: rec, Metrics: m, Logger: testfix.Quiet()}
	p := deletePlan(n)
	start := time.Now()
	rep, err := e.Execute(context.Background(), p, false)
	took := time.Since(start)

	// One failure is transient: the error says so, names that object only, and the
	// others were all still sent.
	if err == nil || !errors.Is(err, core.ErrUnavailable) || !strings.Contains(err.Error(), "ConfigMap cm-003") || strings.Count(err.Error(), "cm-") != 1 {
		t.Fatalf("error = %v, want one transient failure naming cm-003", err)
	}
	if got := s.calls.Load(); got != n {
		t.Fatalf("%d deletes sent, want %d (a failing delete must not stop the others)", got, n)
	}
	if got := s.max.Load(); got > bound || got < 2 {
		t.Fatalf("at most %d deletes in flight, want 2..%d", got, bound)
	}
	// Serial would take n*d = 800ms; with 5 at once about 160ms.
	if serial := time.Duration(n) * s.d; took >= serial {
		t.Errorf("took %s, not faster than serial %s", took, serial)
	}
	// The report is the plan, in plan order, each item with its own outcome.
	if len(rep.Results) != len(p.Items) {
		t.Fatalf("%d results, want %d", len(rep.Results), len(p.Items))
	}
	deleted := 0
	for i, r := range rep.Results {
		if r.Name != p.Items[i].Name {
			t.Fatalf("result %d is %s, want %s (plan order)", i, r.Name, p.Items[i].Name)
		}
		want := OutcomeDeleted
		switch {
		case p.Items[i].Decision == Keep:
			want = OutcomeKept
		case r.Name == "cm-003":
			want = OutcomeError
		case r.Name == "cm-007":
			want = OutcomeChanged
		case r.Name == "cm-011":
			want = OutcomeGone
		}
		if r.Outcome != want {
			t.Errorf("%s: outcome %s, want %s", r.Name, r.Outcome, want)
		}
		if r.Outcome == OutcomeDeleted {
			deleted++
		}
		// Every delete carried its own UID and resourceVersion as preconditions.
		if p.Items[i].Decision == Delete {
			pre, ok := s.pre[r.Name]
			if !ok || pre.UID == nil || *pre.UID != p.Items[i].UID || pre.ResourceVersion == nil || *pre.ResourceVersion != p.Items[i].ResourceVersion {
				t.Errorf("%s: preconditions %+v, want UID %s and resourceVersion %s", r.Name, pre, p.Items[i].UID, p.Items[i].ResourceVersion)
			}
		}
	}
	if deleted != n-3 || rep.Count(OutcomeDeleted) != n-3 {
		t.Fatalf("%d deleted, want %d", deleted, n-3)
	}
	// One Event per deletion, and the metrics count them.
	if got := len(rec.Events); got != n-3 {
		t.Errorf("%d Events recorded, want %d", got, n-3)
	}
	if got := counterValue(t, m.Deleted.WithLabelValues("c1", string(core.KindConfigMap))); got != float64(n-3) {
		t.Errorf("deleted metric %v, want %d", got, n-3)
	}
	for reason, want := range map[string]float64{"error": 1, "changed": 1, "gone": 1} {
		if got := counterValue(t, m.Skipped.WithLabelValues("c1", reason)); got != want {
			t.Errorf("skipped{%s} = %v, want %v", reason, got, want)
		}
	}
}

func TestExecuteParallelOneIsSerial(t *testing.T) {
	s := &slowDeletes{d: time.Millisecond}
	e := &Executor{Client: newSlowClient(t, s), Parallel: 1, Logger: testfix.Quiet()}
	rep, err := e.Execute(context.Background(), deletePlan(10), false)
	if err != nil {
		t.Fatal(err)
	}
	if s.max.Load() != 1 || rep.Count(OutcomeDeleted) != 10 {
		t.Fatalf("max in flight %d, deleted %d; want 1 and 10", s.max.Load(), rep.Count(OutcomeDeleted))
	}
}

func TestExecuteParallelDefaultBound(t *testing.T) {
	s := &slowDeletes{d: 20 * time.Millisecond}
	e := &Executor{Client: newSlowClient(t, s), Logger: testfix.Quiet()}
	if _, err := e.Execute(context.Background(), deletePlan(3*DefaultParallel), false); err != nil {
		t.Fatal(err)
	}
	if got := s.max.Load(); got > DefaultParallel {
		t.Fatalf("%d in flight, want at most DefaultParallel (%d)", got, DefaultParallel)
	}
}

func TestExecuteParallelDryRunSendsNothing(t *testing.T) {
	s := &slowDeletes{}
	e := &Executor{Client: newSlowClient(t, s), Logger: testfix.Quiet()}
	rep, err := e.Execute(context.Background(), deletePlan(20), true)
	if err != nil {
		t.Fatal(err)
	}
	if s.calls.Load() != 0 || rep.Count(OutcomeWouldDelete) != 20 {
		t.Fatalf("%d deletes sent, %d would-delete; want 0 and 20", s.calls.Load(), rep.Count(OutcomeWouldDelete))
	}
}

func TestExecuteParallelStopsOnCancel(t *testing.T) {
	const n, bound = 200, 4
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sent atomic.Int64
	s := &slowDeletes{d: 10 * time.Millisecond, fail: func(string) error {
		if sent.Add(1) == 10 {
			cancel()
		}
		return nil
	}}
	e := &Executor{Client: newSlowClient(t, s), Parallel: bound, Logger: testfix.Quiet()}
	start := time.Now()
	rep, err := e.Execute(ctx, deletePlan(n), false)
	if err == nil || !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("error %v, want a transient error", err)
	}
	// No new delete is sent once ctx ended: at most the ones in flight then.
	if got := s.calls.Load(); got > 10+bound {
		t.Fatalf("%d deletes sent after cancelling at the 10th, want at most %d", got, 10+bound)
	}
	if took := time.Since(start); took > time.Duration(n)*s.d/bound/2 {
		t.Errorf("took %s after cancel: not prompt", took)
	}
	notSent := 0
	for _, r := range rep.Results {
		if r.Outcome == OutcomeError && strings.Contains(r.Error, context.Canceled.Error()) {
			notSent++
		}
	}
	if notSent+rep.Count(OutcomeDeleted) != n {
		t.Fatalf("%d not sent + %d deleted < %d: some delete has no outcome", notSent, rep.Count(OutcomeDeleted), n)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
