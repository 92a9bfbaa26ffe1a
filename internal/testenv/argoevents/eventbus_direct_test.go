package argoevents_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argoevents"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// TestDirectSubscriptionFedByTheRealEventSource: the service's direct EventBus
// subscription (no Sensor) fed by the real eventsource-service running the shipped
// EventSource. 500 ReplicaSets are attached (500 PATCHes); a restart of the EventSource
// replays an ADD for each of them (its relist), which the service acknowledges with no
// write; ReplicaSets created while the service is stopped are published to its durable
// consumer meanwhile and handled when it returns (delivered, acknowledged, each revision
// written once).
func TestDirectSubscriptionFedByTheRealEventSource(t *testing.T) {
	const n, whileDown = 500, 20
	e := newEnv(t)
	es := e.start(argoevents.Config{EventSource: e.eventSource()}, eventSourceReady)
	counter := &kube.RequestCounter{}
	stop, srv := startBusServer(t, e, counter)

	e.createRevisions(0, n)
	controlplane.Eventually(t, time.Minute, "the revisions in the service's cache", func() error {
		if got := eventsCount(t, srv, "revision", ""); got < n {
			return fmt.Errorf("%d of %d seen", got, n)
		}
		return nil
	})
	start := time.Now()
	rss := e.createLabelledReplicaSets(0, n)
	e.waitAllOwned(rss)
	t.Logf("%d ReplicaSets attached %s after the first was created; PATCHes %d", n, time.Since(start).Round(time.Millisecond), counter.Count("PATCH"))
	if got := counter.Count("PATCH"); got != n {
		t.Errorf("%d PATCHes; want %d", got, n)
	}

	t.Run("an EventSource restart replays every ADD and writes nothing", func(t *testing.T) {
		writes, gets, posts, before := configMapWrites(counter), counter.Count("GET"), counter.Count("POST"), eventsCount(t, srv, "eventbus", "")
		if err := es.Stop(); err != nil {
			t.Fatal(err)
		}
		restarted := time.Now()
		es = e.start(argoevents.Config{EventSource: e.eventSource()}, eventSourceReady)
		controlplane.Eventually(t, 2*time.Minute, "the replay handled", func() error {
			if got := eventsCount(t, srv, "eventbus", "ok") - before; got < n {
				return fmt.Errorf("%d of %d replayed ADDs handled", got, n)
			}
			return nil
		})
		t.Logf("replay: %d ADDs handled %s after the restart; PATCH/PUT/DELETE %d, GETs %d (POSTs %d since, %d in all: Events, which the recorder sends asynchronously)",
			eventsCount(t, srv, "eventbus", "")-before, time.Since(restarted).Round(time.Millisecond), configMapWrites(counter)-writes,
			counter.Count("GET")-gets, counter.Count("POST")-posts, counter.Count("POST"))
		if got := configMapWrites(counter) - writes; got != 0 {
			t.Errorf("%d PATCH/PUT/DELETE requests after the replay; want 0", got)
		}
	})

	t.Run("ReplicaSets created while the service is down are caught up from its durable consumer", func(t *testing.T) {
		stop()
		changes := countOwnerChanges(t, e)
		e.createRevisions(n, whileDown)
		down := e.createLabelledReplicaSets(n, whileDown)
		controlplane.Eventually(t, time.Minute, "the EventSource publishing them", func() error {
			if got := durablePending(t, e, eventbus.DefaultDurable); got < whileDown {
				return fmt.Errorf("%d of %d waiting on the durable consumer", got, whileDown)
			}
			return nil
		})
		counter2 := &kube.RequestCounter{}
		back := time.Now()
		_, srv2 := startBusServer(t, e, counter2)
		e.waitAllOwned(down)
		controlplane.Eventually(t, time.Minute, "the durable consumer drained", func() error {
			if got := durablePending(t, e, eventbus.DefaultDurable); got != 0 {
				return fmt.Errorf("%d still pending", got)
			}
			return nil
		})
		t.Logf("caught up: %d attached %s after the service returned; its EventBus events %d; PATCHes %d",
			whileDown, time.Since(back).Round(time.Millisecond), eventsCount(t, srv2, "eventbus", ""), counter2.Count("PATCH"))
		if got := eventsCount(t, srv2, "eventbus", ""); got < whileDown {
			t.Errorf("%d EventBus events after the return; want at least %d (the ones published meanwhile)", got, whileDown)
		}
		// Each revision written once, whichever way in wrote it: on its return the service's
		// revision side (its initial list) and the EventBus race for the same objects; the
		// one that comes second sees the first one's write (core's recent writes), even
		// where the cache does not yet, and sends no PATCH.
		if got := counter2.Count("PATCH"); got != whileDown {
			t.Errorf("%d PATCHes; want %d", got, whileDown)
		}
		names := make([]string, 0, whileDown)
		for i := n; i < n+whileDown; i++ {
			names = append(names, fmt.Sprintf("cfg-%d", i))
		}
		checkWrittenOnce(t, changes, names)
	})
}

// configMapWrites counts the service's requests that can change a revision: PATCH, PUT
// and DELETE (its POSTs create Events, which the recorder sends asynchronously).
func configMapWrites(c *kube.RequestCounter) int {
	return c.Count("PATCH") + c.Count("PUT") + c.Count("DELETE")
}

// startBusServer runs the service with only the direct EventBus subscription (default
// durable consumer) on the test's NATS, requests counted; stop ends it (also at cleanup).
func startBusServer(t *testing.T, e *env, counter *kube.RequestCounter) (stop func(), srv *server.Server) {
	t.Helper()
	srv, err := server.New(counter.Wrap(e.cp.RESTConfig()), server.Options{GRPCAddr: "-", HTTPAddr: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second,
		Ingress: server.Ingress{EventBus: &eventbus.SubscriberOptions{URL: e.nats.ClientURL(), TLS: eventbus.TLS{CAFile: e.nats.CAFile()}}}})
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server.Run: %v", err)
		}
	}
	t.Cleanup(stop)
	controlplane.Eventually(t, time.Minute, "the service ready (caches, EventBus subscribed)", func() error {
		if !srv.Ready() {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	return stop, srv
}

// createRevisions creates opted-in ConfigMaps cfg-<from>..cfg-<from+count-1>.
func (e *env) createRevisions(from, count int) {
	e.t.Helper()
	e.parallel(from, count, func(i int) error {
		_, err := e.kube.CoreV1().ConfigMaps(e.ns).Create(e.ctx, testfix.Revision(e.ns, fmt.Sprintf("cfg-%d", i)), metav1.CreateOptions{})
		return err
	})
}

// createLabelledReplicaSets creates ReplicaSets rs-<i> mounting cfg-<i>, labelled as a
// Rollout's (the shipped EventSource's rollout-replicasets filter).
func (e *env) createLabelledReplicaSets(from, count int) []*appsv1.ReplicaSet {
	e.t.Helper()
	out := make([]*appsv1.ReplicaSet, count)
	e.parallel(from, count, func(i int) error {
		rs := testfix.ReplicaSet(fmt.Sprintf("rs-%d", i), fmt.Sprintf("cfg-%d", i))
		rs.Labels = map[string]string{"rollouts-pod-template-hash": "h"}
		created, err := e.kube.AppsV1().ReplicaSets(e.ns).Create(e.ctx, rs, metav1.CreateOptions{})
		out[i-from] = created
		return err
	})
	return out
}

func (e *env) parallel(from, count int, f func(i int) error) {
	e.t.Helper()
	var g errgroup.Group
	g.SetLimit(8)
	for i := from; i < from+count; i++ {
		g.Go(func() error { return f(i) })
	}
	if err := g.Wait(); err != nil {
		e.t.Fatal(err)
	}
}

// waitAllOwned waits until each ReplicaSet's ConfigMap (cfg-<i> of rs-<i>) is owned by it.
func (e *env) waitAllOwned(rss []*appsv1.ReplicaSet) {
	e.t.Helper()
	want := map[string]string{}
	for _, rs := range rss {
		want["cfg-"+rs.Name[len("rs-"):]] = string(rs.UID)
	}
	controlplane.Eventually(e.t, 3*time.Minute, fmt.Sprintf("%d ConfigMaps owned", len(rss)), func() error {
		list, err := e.kube.CoreV1().ConfigMaps(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		owned := 0
		for _, cm := range list.Items {
			uid, ok := want[cm.Name]
			if !ok {
				continue
			}
			for _, o := range cm.OwnerReferences {
				if string(o.UID) == uid {
					owned++
					break
				}
			}
		}
		if owned != len(want) {
			return fmt.Errorf("%d of %d owned", owned, len(want))
		}
		return nil
	})
}
