package gc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

var sharedCP *controlplane.ControlPlane

// TestMain starts the control plane with the StatefulSet controller too: its
// ControllerRevisions (template history) are real.
func TestMain(m *testing.M) {
	controllers := append(slices.Clone(controlplane.DefaultControllers), "statefulset-controller")
	os.Exit(controlplane.TestMainWith(m, &sharedCP, controlplane.Options{Controllers: controllers}))
}

var seq atomic.Int64

type env struct {
	cp      *controlplane.ControlPlane
	clients *kube.Clients
	ns      string
}

func setup(t *testing.T) *env {
	t.Helper()
	cp := controlplane.Require(t, sharedCP)
	clients, err := kube.NewClients(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("gc-%d", seq.Add(1))
	if _, err := clients.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return &env{cp: cp, clients: clients, ns: ns}
}

func (e *env) source() gc.LiveSource {
	return gc.LiveSource{Client: e.clients.Kube, Dynamic: e.clients.Dynamic, Metadata: e.clients.Metadata}
}

func (e *env) attacher(t *testing.T) *core.Attacher {
	a, err := core.NewAttacher(core.Config{Client: e.clients.Kube,
		Reader: core.LiveReader{Client: e.clients.Kube, Dynamic: e.clients.Dynamic, Metadata: e.clients.Metadata}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (e *env) configMap(t *testing.T, name, family string, ann map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Annotations: ann,
		Labels: map[string]string{core.LabelRevision: "true", core.LabelFamily: family}}, Data: map[string]string{"k": "v"}}
	out, err := e.clients.Kube.CoreV1().ConfigMaps(e.ns).Create(context.Background(), cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func podSpecUsing(cm string) corev1.PodSpec {
	return corev1.PodSpec{RestartPolicy: corev1.RestartPolicyOnFailure, Containers: []corev1.Container{{Name: "app", Image: "example.invalid/app:1",
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}}}}
}

func (e *env) replicaSet(t *testing.T, name, cm string) *appsv1.ReplicaSet {
	t.Helper()
	lbl := map[string]string{"app": name}
	spec := podSpecUsing(cm)
	spec.RestartPolicy = corev1.RestartPolicyAlways
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl}, Spec: spec}}}
	out, err := e.clients.Kube.AppsV1().ReplicaSets(e.ns).Create(context.Background(), rs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) exists(t *testing.T, name string) bool {
	t.Helper()
	_, err := e.clients.Kube.CoreV1().ConfigMaps(e.ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// requireSweepsUnavailable sweeps e.ns with sw twice: a sweep that cannot read what it
// must fails, unavailable, and returns before the sweeper's context ends (it is not held
// for the life of the cluster).
func (e *env) requireSweepsUnavailable(t *testing.T, sw *gc.Sweeper) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a sweeper's context: it outlives the sweeps
	defer cancel()
	for _, sweep := range []string{"first", "second"} {
		_, err := sw.SweepNamespace(ctx, e.ns)
		if !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("%s sweep: want an unavailable error, got %v", sweep, err)
		}
		if ctx.Err() != nil {
			t.Fatalf("%s sweep: returned only when the sweeper's context ended", sweep)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// A revision planned for deletion that gets attached (becomes referenced and owned)
// before the delete survives: the delete's precondition on resourceVersion fails and
// the executor reports "changed".
func TestPreconditionSavesRevisionAttachedBetweenPlanAndDelete(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.configMap(t, "cfg-1a2b3c", "cfg", nil)
	snap, err := e.source().Snapshot(ctx, e.ns)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := gc.PlanNamespace(snap, gc.Options{MinAge: 0, Keep: 0})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Count(gc.Delete) != 1 {
		t.Fatalf("plan: %+v", plan.Items)
	}
	// Meanwhile: a ReplicaSet starts using it and the attacher attaches it.
	rs := e.replicaSet(t, "web-5d4c3b2a1", "cfg-1a2b3c")
	res, err := e.attacher(t).Attach(ctx, core.Event{Namespace: e.ns, Name: rs.Name, UID: rs.UID, Options: core.DefaultOptions()})
	if err != nil || res.Writes() != 1 {
		t.Fatalf("attach: %v %+v", err, res)
	}
	rep, err := (&gc.Executor{Client: e.clients.Kube}).Execute(ctx, plan, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Results[0].Outcome; got != gc.OutcomeChanged {
		t.Fatalf("outcome %q, want %q (%s)", got, gc.OutcomeChanged, rep.Results[0].Error)
	}
	if !e.exists(t, "cfg-1a2b3c") {
		t.Fatal("the revision was deleted")
	}
}

// A revision referenced by a new ReplicaSet that is not attached yet is repaired by a
// real sweep (second plan sees the reference), never deleted.
func TestSweepRepairsReferencedUnattachedRevision(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.configMap(t, "cfg-9z8y7x", "cfg", nil)
	rs := e.replicaSet(t, "web-7f6e5d4c3", "cfg-9z8y7x")
	sw, err := gc.NewSweeper(gc.Config{Client: e.clients.Kube, Source: e.source(), Attacher: e.attacher(t), Namespaces: []string{e.ns}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sw.SweepNamespace(ctx, e.ns)
	if err != nil {
		t.Fatal(err)
	}
	if got := rep.Results[0]; got.Outcome != gc.OutcomeRepaired {
		t.Fatalf("outcome %q (%s %s)", got.Outcome, got.Reason, got.Error)
	}
	cm, err := e.clients.Kube.CoreV1().ConfigMaps(e.ns).Get(ctx, "cfg-9z8y7x", metav1.GetOptions{})
	if err != nil || len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].UID != rs.UID {
		t.Fatalf("not attached: %v %+v", err, cm)
	}
}

// A revision only a CronJob's job template references stays; its unreferenced sibling
// goes, with a Kubernetes Event recorded for the deletion.
func TestCronJobOnlyReferenceKeepsRevision(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.configMap(t, "nightly-cfg-1", "nightly", nil)
	e.configMap(t, "nightly-cfg-2", "nightly", nil)
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: e.ns}, Spec: batchv1.CronJobSpec{
		Schedule: "0 3 * * *", Suspend: ptr(true),
		JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: podSpecUsing("nightly-cfg-1")}}}}}
	if _, err := e.clients.Kube.BatchV1().CronJobs(e.ns).Create(ctx, cj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder(ctx, e.clients.Kube)
	defer rec.shutdown()
	metrics, err := gc.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	sw, err := gc.NewSweeper(gc.Config{Client: e.clients.Kube, Source: e.source(), Recorder: rec.recorder, Metrics: metrics, Options: gc.Options{MinAge: 0, Keep: 0}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sw.SweepNamespace(ctx, e.ns)
	if err != nil {
		t.Fatal(err)
	}
	if !e.exists(t, "nightly-cfg-1") {
		t.Fatalf("CronJob-referenced revision deleted: %+v", rep.Results)
	}
	if e.exists(t, "nightly-cfg-2") {
		t.Fatalf("orphan survived: %+v", rep.Results)
	}
	var m dto.Metric
	if err := metrics.Deleted.WithLabelValues("", "ConfigMap").Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		got := m.GetCounter().GetValue()
		t.Fatalf("configmap_attacher_gc_deleted_total = %v (%v), want 1", got, err)
	}
	controlplane.Eventually(t, 20*time.Second, "a Collected event", func() error {
		evs, err := e.clients.Kube.CoreV1().Events(e.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ev := range evs.Items {
			if ev.Reason == "Collected" && ev.InvolvedObject.Name == "nightly-cfg-2" {
				return nil
			}
		}
		return fmt.Errorf("%d events, none Collected for nightly-cfg-2", len(evs.Items))
	})
}

// The dry run's plan lists exactly what the real run then deletes, on a namespace with
// every kind of keep reason.
func TestDryRunEqualsRealRun(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	for i := 1; i <= 4; i++ {
		e.configMap(t, fmt.Sprintf("app-cfg-%d", i), "app", nil)
		time.Sleep(1100 * time.Millisecond) // distinct creation seconds: a stable family order
	}
	e.configMap(t, "app-skip", "pinned", map[string]string{core.AnnotationSkip: "true"})
	e.configMap(t, "other-1", "other", nil)
	e.replicaSet(t, "app-6c5b4a3d2", "app-cfg-1")
	opts := gc.Options{MinAge: 0, Keep: 1}
	dry, err := gc.NewSweeper(gc.Config{Source: e.source(), Options: opts, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	dryRep, err := dry.SweepNamespace(ctx, e.ns)
	if err != nil {
		t.Fatal(err)
	}
	real, err := gc.NewSweeper(gc.Config{Client: e.clients.Kube, Source: e.source(), Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	realRep, err := real.SweepNamespace(ctx, e.ns)
	if err != nil {
		t.Fatal(err)
	}
	want := outcomes(dryRep, gc.OutcomeWouldDelete)
	got := outcomes(realRep, gc.OutcomeDeleted)
	if fmt.Sprint(want) != fmt.Sprint(got) {
		t.Fatalf("dry run would delete %v, real run deleted %v", want, got)
	}
	// app-cfg-1 referenced (repair), app-cfg-4 newest unreferenced (keep 1), skip kept,
	// other-1 newest of its family: only app-cfg-2 and app-cfg-3 go.
	if fmt.Sprint(got) != "[app-cfg-2 app-cfg-3]" {
		t.Fatalf("deleted %v", got)
	}
	for _, name := range got {
		if e.exists(t, name) {
			t.Fatalf("%s still exists", name)
		}
	}
}

func outcomes(r *gc.Report, o gc.Outcome) []string {
	var out []string
	for _, it := range r.Results {
		if it.Outcome == o {
			out = append(out, it.Name)
		}
	}
	sort.Strings(out)
	return out
}

// Two sweepers electing on one Lease: exactly one leads at a time, and the other takes
// over when the leader stops.
func TestLeaderElectionOneSweeper(t *testing.T) {
	e := setup(t)
	mk := func(id string) *gc.Sweeper {
		sw, err := gc.NewSweeper(gc.Config{Client: e.clients.Kube, Source: e.source(), DryRun: true, Namespaces: []string{e.ns},
			Interval: time.Hour, LeaderElection: &gc.LeaderElection{Namespace: e.ns, Identity: id,
				LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		return sw
	}
	a, b := mk("a"), mk("b")
	ctxA, stopA := context.WithCancel(context.Background())
	ctxB, stopB := context.WithCancel(context.Background())
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go func() { doneA <- a.Run(ctxA) }()
	go func() { doneB <- b.Run(ctxB) }()
	defer func() { stopA(); stopB(); <-doneA; <-doneB }()

	controlplane.Eventually(t, 20*time.Second, "a leader", func() error {
		if a.IsLeader() || b.IsLeader() {
			return nil
		}
		return fmt.Errorf("no leader yet")
	})
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if a.IsLeader() && b.IsLeader() {
			t.Fatal("two leaders at once")
		}
	}
	leader, follower, stop, done := a, b, stopA, doneA
	if b.IsLeader() {
		leader, follower, stop, done = b, a, stopB, doneB
	}
	if follower.IsLeader() {
		t.Fatal("both lead")
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	done <- nil // for the deferred drain
	if leader.IsLeader() {
		t.Fatal("stopped sweeper still claims leadership")
	}
	controlplane.Eventually(t, 20*time.Second, "the follower to take over", func() error {
		if follower.IsLeader() {
			return nil
		}
		return fmt.Errorf("follower not leading yet")
	})
}

type recorder struct {
	recorder    record.EventRecorder
	broadcaster record.EventBroadcaster
}

func newRecorder(ctx context.Context, kc kubernetes.Interface) *recorder {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kc.CoreV1().Events("")})
	return &recorder{recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "configmap-attacher-gc-test"}), broadcaster: b}
}

func (r *recorder) shutdown() { r.broadcaster.Shutdown() }

// Run sweeps at once, then sweeps a triggered namespace without waiting for the interval.
func TestRunAndTrigger(t *testing.T) {
	e := setup(t)
	e.configMap(t, "first-1a2b3", "first", nil)
	sw, err := gc.NewSweeper(gc.Config{Client: e.clients.Kube, Source: e.source(), Options: gc.Options{MinAge: 0, Keep: 0},
		Namespaces: []string{e.ns}, Interval: time.Hour, TriggerDelay: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sw.Run(ctx) }()
	controlplane.Eventually(t, 20*time.Second, "the first periodic sweep", func() error {
		if e.exists(t, "first-1a2b3") {
			return fmt.Errorf("first-1a2b3 still there")
		}
		return nil
	})
	e.configMap(t, "second-4c5d6", "second", nil)
	sw.Trigger(e.ns)
	controlplane.Eventually(t, 20*time.Second, "the triggered sweep", func() error {
		if e.exists(t, "second-4c5d6") {
			return fmt.Errorf("second-4c5d6 still there")
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}
