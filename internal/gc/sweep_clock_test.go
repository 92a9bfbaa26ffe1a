package gc_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// afterDelete runs fn once, right after the apiserver has answered the DELETE of the
// ConfigMap named name: what happens in the cluster while a sweep is still deleting.
type afterDelete struct {
	next http.RoundTripper
	name string
	once sync.Once
	fn   func()
}

func (a *afterDelete) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(r)
	if err == nil && r.Method == http.MethodDelete && strings.HasSuffix(r.URL.Path, "/configmaps/"+a.name) {
		a.once.Do(a.fn)
	}
	return resp, err
}

// TestPodStartedDuringALongSweepKeepsItsRevision (breaker s7): safety rule 7, a
// revision that a live Pod uses is never deleted. A sweep's deletes are paced by the
// client's QPS (50 by default: a GET and a DELETE per orphan), so a namespace with
// thousands of orphans is deleted over minutes, all resting on the one live plan taken
// before the first delete; the confirm before each delete reads only the revision and
// its owners. A Pod created during the deletes that mounts a later candidate (nothing
// changes the revision itself) saw it deleted. Here the Pod is created right after the
// first delete; deletes one at a time and a plan that is always "too old" make every
// later delete plan again first.
func TestPodStartedDuringALongSweepKeepsItsRevision(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	for _, n := range []string{"orph-a", "orph-b", "orph-c"} {
		e.configMap(t, n, "orph", nil)
	}
	e.waitDefaultServiceAccount(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "late-user", Namespace: e.ns}, Spec: podSpecUsing("orph-c")}
	var createErr error
	cfg := rest.CopyConfig(e.cp.RESTConfig())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &afterDelete{next: rt, name: "orph-a", fn: func() {
			_, createErr = e.clients.Kube.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{})
		}}
	})
	clients, err := kube.NewClients(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sw, err := gc.NewSweeper(gc.Config{Client: clients.Kube, Metadata: clients.Metadata, Namespaces: []string{e.ns},
		Source:  gc.LiveSource{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata},
		Options: gc.Options{MinAge: 0, Keep: 0}, Parallel: 1, MaxPlanAge: time.Nanosecond,
		Logger: testfix.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := sw.SweepNamespace(ctx, e.ns)
	if err != nil {
		t.Fatal(err)
	}
	if createErr != nil {
		t.Fatalf("creating the Pod during the sweep: %v", createErr)
	}
	outcome := map[string]gc.Outcome{}
	for _, r := range rep.Results {
		outcome[r.Name] = r.Outcome
	}
	if !e.exists(t, "orph-c") {
		t.Fatalf("deleted ConfigMap orph-c that Pod late-user, created during the sweep, mounts: %v", outcome)
	}
	if outcome["orph-a"] != gc.OutcomeDeleted || outcome["orph-b"] != gc.OutcomeDeleted || outcome["orph-c"] != gc.OutcomeKept {
		t.Fatalf("outcomes %v, want orph-a and orph-b deleted, orph-c kept", outcome)
	}
}

// waitDefaultServiceAccount waits for the namespace's default ServiceAccount (its
// controller creates it), without which a Pod is refused.
func (e *env) waitDefaultServiceAccount(t *testing.T) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := e.clients.Kube.CoreV1().ServiceAccounts(e.ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("default ServiceAccount of %s: %v", e.ns, err)
	}
}

// TestGracePeriodIsMeasuredOnTheApiserversClock (breaker s7): safety rule 7's grace
// period compares a revision's creationTimestamp, stamped by the apiserver, with the
// sweeper's clock. A service whose node clock runs ahead (by more than --gc-min-age)
// swept revisions created a moment ago, before the workload created with them; keep-N
// alone does not save them (keep 0, or more new revisions than keep in a family). The
// clock a sweep plans with is now the earlier of the local one and the apiserver's (the
// Date of its answers).
func TestGracePeriodIsMeasuredOnTheApiserversClock(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.configMap(t, "fresh-1a2b3c", "fresh", nil)
	ahead := func() time.Time { return time.Now().Add(2 * time.Hour) } // this node's clock, 2 h fast
	clock := kube.NewServerClock(ahead)
	clients, err := kube.NewClients(clock.Wrap(e.cp.RESTConfig()))
	if err != nil {
		t.Fatal(err)
	}
	sw, err := gc.NewSweeper(gc.Config{Client: clients.Kube, Metadata: clients.Metadata, Namespaces: []string{e.ns},
		Source:  gc.LiveSource{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata},
		Options: gc.Options{MinAge: time.Hour, Keep: 0}, Clock: clock.Now, Logger: testfix.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := clients.Kube.Discovery().ServerVersion(); err != nil { // any answer sets the clock, as serve's probe does
		t.Fatal(err)
	}
	rep, err := sw.SweepNamespace(ctx, e.ns)
	if err != nil {
		t.Fatal(err)
	}
	if !e.exists(t, "fresh-1a2b3c") || len(rep.Results) != 1 || rep.Results[0].Outcome != gc.OutcomeKept {
		t.Fatalf("a revision created a moment ago was not kept by the 1 h grace period (service clock 2 h ahead): %+v", rep.Results)
	}
}
