package faults_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// ways are the ways in the fleet tests send events through, in turn.
var ways = []dispatch.Path{dispatch.PathGRPC, dispatch.PathHTTP, dispatch.PathEventBus}

// delivery is the ADD of ReplicaSet name (and its revision cm-name) in cluster c, sent
// through way; rs is set once it is created.
type delivery struct {
	c, name string
	way     dispatch.Path
	rs      *appsv1.ReplicaSet
}

// deliveries are the ADDs of round r of every cluster of clusters, each round through
// another way in for each cluster, so that over three rounds every cluster gets all three.
func deliveries(clusters []string, rounds ...int) []*delivery {
	var out []*delivery
	for _, r := range rounds {
		for i, c := range clusters {
			out = append(out, &delivery{c: c, name: fmt.Sprintf("rs-r%d", r), way: ways[(i+r)%len(ways)]})
		}
	}
	return out
}

// deliver creates d's revision and ReplicaSet and sends its ADD: over gRPC or HTTP to a
// live replica that does not own d's cluster (another one at each retry), until it is
// answered ok; over the EventBus it is published once (the replicas share one durable
// consumer, so any of them takes it; JetStream redelivers it until it is acked). A
// retry-later answer or a replica gone is retried every 200 ms, as a Sensor behind a
// Service does. It returns the number of retries.
func (h *fleetHub) deliver(ctx context.Context, d *delivery) (int, error) {
	rs, err := createRevisionSet(ctx, h.client(d.c), d.c, d.name)
	if err != nil {
		return 0, err
	}
	d.rs = rs
	for try := 0; ; try++ {
		err := h.send(ctx, d, try)
		if err == nil || !errors.Is(err, errRetryLater) {
			return try, err
		}
		select {
		case <-ctx.Done():
			return try, fmt.Errorf("%s/%s over %s, still retried: %w (%w)", d.c, d.name, d.way, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// send sends d's ADD once, over gRPC or HTTP to the try-th replica not owning its cluster.
func (h *fleetHub) send(ctx context.Context, d *delivery, try int) error {
	if d.way == dispatch.PathEventBus {
		if err := publishAdd(ctx, h.b, d.c, d.rs); err != nil {
			return fmt.Errorf("publishing: %w: %w", errRetryLater, err)
		}
		return nil
	}
	svc, err := h.pickNotOwner(d.c, try)
	if err != nil {
		return fmt.Errorf("%w: %w", errRetryLater, err)
	}
	if d.way == dispatch.PathGRPC {
		return executeGRPC(ctx, svc, d.c, d.rs)
	}
	return postHTTP(ctx, svc, d.c, d.rs)
}

// deliverAll delivers ds, 4 at a time, each within 90 s; once started ADDs have begun,
// it calls started (when not nil) while the others go on. It returns the retries.
func (h *fleetHub) deliverAll(ds []*delivery, start int, started func()) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	var retries atomic.Int64
	for k, d := range ds {
		if k == start && started != nil {
			started()
		}
		g.Go(func() error {
			n, err := h.deliver(gctx, d)
			retries.Add(int64(n))
			return err
		})
	}
	err := g.Wait()
	return int(retries.Load()), err
}

// attachedAll is nil once every delivery's ReplicaSet owns its revision.
func (h *fleetHub) attachedAll(ds []*delivery) error {
	for _, d := range ds {
		if err := attachedIn(h.client(d.c), []*appsv1.ReplicaSet{d.rs}); err != nil {
			return fmt.Errorf("cluster %s: %w", d.c, err)
		}
	}
	return nil
}

// forwarded sums configmap_attacher_events_forwarded_total{path, result="ok"} over the
// live replicas.
func (h *fleetHub) forwarded(t *testing.T, path dispatch.Path) int {
	t.Helper()
	var sum float64
	for _, s := range h.replicas {
		select {
		case <-s.done:
			continue
		default:
		}
		v, err := s.metric("configmap_attacher_events_forwarded_total", map[string]string{"path": string(path), "result": "ok"})
		require.NoError(t, err)
		sum += v
	}
	return int(sum)
}

// TestAFleetOverTwoControlPlanesAttachesEveryEventOnceWhereverItLands: three real
// `serve --fleet` processes (no --watch: only events attach) whose home cluster is
// control plane A serve 8 logical clusters, Argo CD cluster Secrets scoped to a
// namespace each, 4 on A and 4 on a second control plane B, with an embedded NATS
// JetStream EventBus, sweeping every 2 s. Every cluster has exactly one owner. Each
// ReplicaSet's ADD (its revision created just before) goes through one way in, in turn
// gRPC, HTTP and the EventBus: gRPC and HTTP to a replica that does not own its cluster
// (forwarded to the owner), the EventBus to whichever replica takes it. Every revision is
// owned by its ReplicaSet and written exactly once (its owners change once; the PATCHes
// of ConfigMaps on each control plane equal its attaches). The busiest replica is
// SIGKILLed while ADDs flow; the sender retries retry-later answers as a Sensor does; the
// victim's clusters are owned again within 30 s and every ReplicaSet is attached. A
// cluster Secret added (on B) is owned and one deleted (on A) is dropped within 30 s; an
// event for the added cluster is attached. Orphans are swept, no used revision deleted.
func TestAFleetOverTwoControlPlanesAttachesEveryEventOnceWhereverItLands(t *testing.T) {
	fleetRuns++
	p := newTwoPlaneFleet(t, fmt.Sprintf("planes%d", fleetRuns), 4) // -count=N runs on one control plane A
	steady := p.steady(t)
	stream := p.killMidStream(t)
	late := p.addAndRemoveClusters(t)
	p.writtenOnce(t, append(append(steady, stream...), late))
}

// twoPlaneFleet is a fleet whose logical clusters are on the package's control plane (A,
// the replicas' home) and on one of the test's own (B), with the test's watches, orphans
// and PATCH counts.
type twoPlaneFleet struct {
	*fleetHub
	planeB   *controlplane.ControlPlane
	prefix   string
	names    []string // "in-cluster" and the logical clusters
	watches  map[string]*ownerWatch
	orphans  map[string][]string
	apis     map[*controlplane.ControlPlane]*apiRequests
	patches0 map[*controlplane.ControlPlane]int
}

// newTwoPlaneFleet starts control plane B, an EventBus, perPlane clusters on each plane
// (each with 2 orphans) and 3 replicas without --watch, sweeping, and waits until the
// ownership has settled.
func newTwoPlaneFleet(t *testing.T, prefix string, perPlane int) *twoPlaneFleet {
	t.Helper()
	b := newBus(t)
	p := &twoPlaneFleet{planeB: controlplane.StartForTest(t, controlplane.Options{Name: "b", SkipCRDs: true}), prefix: prefix,
		fleetHub: newFleetHub(t, b, prefix, 0), names: []string{"in-cluster"}, watches: map[string]*ownerWatch{},
		orphans: map[string][]string{}, patches0: map[*controlplane.ControlPlane]int{}}
	p.unwatched = true
	for i := range perPlane {
		for label, plane := range []*controlplane.ControlPlane{cp, p.planeB} {
			c := fmt.Sprintf("%s-%s%d", prefix, []string{"a", "b"}[label], i)
			p.addClusterOn(t, plane, c)
			p.names = append(p.names, c)
			p.watches[c] = watchOwners(t, p.client(c), c)
			p.orphans[c] = orphanRevisions(t, p.client(c), c, "old", 2)
		}
	}
	for _, id := range []string{"r-a", "r-b", "r-c"} {
		p.start(t, id, prefix, append([]string{"--eventbus-ack-wait", "5s"}, sweepFlags...)...)
	}
	p.settled(t, p.names, 120*time.Second)
	p.apis = map[*controlplane.ControlPlane]*apiRequests{cp: newAPIRequests(t), p.planeB: apiRequestsOf(t, p.planeB)}
	for plane, api := range p.apis {
		p.patches0[plane] = api.count(t, "PATCH", "configmaps", "200")
	}
	return p
}

// steady delivers three rounds with the ownership settled: every gRPC and HTTP ADD lands
// on a non-owner and is forwarded, and so is at least one EventBus message; all are
// attached and the orphans swept.
func (p *twoPlaneFleet) steady(t *testing.T) []*delivery {
	t.Helper()
	steady := deliveries(p.names[1:], 0, 1, 2)
	_, err := p.deliverAll(steady, 0, nil)
	require.NoError(t, err)
	controlplane.Eventually(t, 60*time.Second, "the first rounds attached, the stream acked", func() error {
		if err := p.attachedAll(steady); err != nil {
			return err
		}
		return p.b.idle()
	})
	sent := map[dispatch.Path]int{}
	for _, d := range steady {
		sent[d.way]++
	}
	for _, way := range ways[:2] {
		assert.GreaterOrEqual(t, p.forwarded(t, way), sent[way], "%s events answered by their cluster's owner", way)
	}
	viaBus := p.forwarded(t, dispatch.PathEventBus)
	assert.Positive(t, viaBus, "EventBus messages taken by a replica not owning their cluster, forwarded")
	t.Logf("steady: %d ADDs (%v), forwarded ok: grpc %d, http %d, eventbus %d of %d", len(steady), sent,
		p.forwarded(t, dispatch.PathGRPC), p.forwarded(t, dispatch.PathHTTP), viaBus, sent[dispatch.PathEventBus])
	used := usedRevisions(setsOf(steady))
	controlplane.Eventually(t, 60*time.Second, "the orphans swept", func() error { return sweptAndKept(t, p.watches, p.orphans, used) })
	return steady
}

// killMidStream delivers two more rounds and SIGKILLs the busiest replica once four ADDs
// are under way: its clusters are owned again within 30 s, every ADD is answered ok in
// the end (retried) and attached.
func (p *twoPlaneFleet) killMidStream(t *testing.T) []*delivery {
	t.Helper()
	victim, victimClusters := p.busiest(p.names)
	stream := deliveries(p.names[1:], 3, 4)
	done := make(chan error, 1)
	var retries int
	kill := make(chan struct{})
	go func() {
		var err error
		retries, err = p.deliverAll(stream, 4, func() { close(kill) })
		done <- err
	}()
	<-kill
	p.replicas[victim].kill()
	killed := time.Now()
	controlplane.Eventually(t, 30*time.Second, "the killed replica's clusters owned again", func() error { return p.exactlyOne(p.names) })
	owned := time.Since(killed)
	require.NoError(t, <-done)
	controlplane.Eventually(t, 90*time.Second, "every ReplicaSet of the stream attached, the stream acked", func() error {
		if err := p.attachedAll(stream); err != nil {
			return err
		}
		return p.b.idle()
	})
	t.Logf("SIGKILLed %s (owner of %v) with ADDs under way: owned again after %s; %d ADDs, %d retries by the sender; all attached after %s",
		victim, victimClusters, owned.Round(100*time.Millisecond), len(stream), retries, time.Since(killed).Round(100*time.Millisecond))
	return stream
}

// addAndRemoveClusters adds a cluster Secret on B and deletes one of A: owned and dropped
// within 30 s; an ADD for the added cluster, sent to a non-owner, is attached.
func (p *twoPlaneFleet) addAndRemoveClusters(t *testing.T) *delivery {
	t.Helper()
	added, removed := p.prefix+"-b-new", p.names[1]
	changed := time.Now()
	p.addClusterOn(t, p.planeB, added)
	require.NoError(t, p.kc.CoreV1().Secrets(p.secrets).Delete(context.Background(), removed, metav1.DeleteOptions{}))
	live := append(slices.DeleteFunc(slices.Clone(p.names), func(c string) bool { return c == removed }), added)
	controlplane.Eventually(t, 30*time.Second, "the added cluster owned, the removed one dropped", func() error {
		if o := p.owners([]string{removed})[removed]; len(o) > 0 {
			return fmt.Errorf("removed cluster %s still run by %v", removed, o)
		}
		return p.exactlyOne(live)
	})
	t.Logf("cluster %s added and %s removed: settled after %s", added, removed, time.Since(changed).Round(100*time.Millisecond))
	p.watches[added] = watchOwners(t, p.client(added), added)
	late := &delivery{c: added, name: "rs-added", way: dispatch.PathHTTP}
	_, err := p.deliverAll([]*delivery{late}, 0, nil)
	require.NoError(t, err)
	controlplane.Eventually(t, 30*time.Second, "the added cluster's ReplicaSet attached", func() error { return p.attachedAll([]*delivery{late}) })
	return late
}

// writtenOnce checks that all was attached with one write each: every used revision's
// owners changed once, none twice, the successful PATCHes of ConfigMaps on each control
// plane equal its attaches; and that only orphans were deleted, all of them.
func (p *twoPlaneFleet) writtenOnce(t *testing.T, all []*delivery) {
	t.Helper()
	used := usedRevisions(setsOf(all))
	require.NoError(t, sweptAndKept(t, p.watches, p.orphans, used))
	onlyOrphansDeleted(t, p.watches)
	for c, w := range p.watches {
		once, twice, _ := w.summary()
		assert.Zero(t, twice, "cluster %s: ConfigMaps written twice: %v", c, w.twiceWritten())
		assert.Equal(t, len(used[c]), once, "cluster %s: revisions written once", c)
	}
	for plane, api := range p.apis {
		attaches := 0
		for _, d := range all {
			if p.planes[d.c] == plane {
				attaches++
			}
		}
		patches := api.count(t, "PATCH", "configmaps", "200") - p.patches0[plane]
		t.Logf("control plane %s: %d attaches, %d successful PATCHes of ConfigMaps", plane.Name(), attaches, patches)
		assert.Equal(t, attaches, patches, "control plane %s: one successful PATCH per attach", plane.Name())
	}
}

// setsOf returns the ReplicaSets of ds.
func setsOf(ds []*delivery) []*appsv1.ReplicaSet {
	out := make([]*appsv1.ReplicaSet, len(ds))
	for i, d := range ds {
		out[i] = d.rs
	}
	return out
}
