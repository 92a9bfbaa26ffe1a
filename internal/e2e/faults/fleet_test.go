package faults_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/argoproj/argo-events/pkg/sensors/triggers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configmap-attacher/configmap-attacher/eventsource"
	"github.com/configmap-attacher/configmap-attacher/internal/event"
	"github.com/configmap-attacher/configmap-attacher/internal/shard"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// fleetHub is a fleet of `serve` processes sharing logical clusters: Argo CD cluster
// Secrets, each naming a local control plane (the package's, or another) scoped to a
// namespace of its own. The Secrets, the Leases and the home namespace are on the
// package's control plane, the replicas' default cluster.
type fleetHub struct {
	kc       kubernetes.Interface
	secrets  string // namespace of the Argo CD cluster Secrets
	leases   string // namespace of the fleet's Leases
	replicas map[string]*service
	b        *bus
	planes   map[string]*controlplane.ControlPlane // the control plane of each cluster added
	// unwatched starts the replicas without --watch: events reach them only through the
	// ways in (and the revision side), so an attach is the work of an event.
	unwatched bool
}

func newFleetHub(t *testing.T, b *bus, prefix string, clusters int) *fleetHub {
	t.Helper()
	h := &fleetHub{kc: controlplane.Require(t, cp).Client(), secrets: prefix + "-argocd", leases: prefix + "-leases",
		replicas: map[string]*service{}, b: b, planes: map[string]*controlplane.ControlPlane{}}
	for _, ns := range []string{h.secrets, h.leases, prefix + "-home"} {
		newNamespace(t, ns)
	}
	for i := range clusters {
		h.addCluster(t, fmt.Sprintf("%s-c%d", prefix, i))
	}
	return h
}

// addCluster creates namespace name and an Argo CD cluster Secret for cluster name
// scoped to it, on the package's control plane.
func (h *fleetHub) addCluster(t *testing.T, name string) { h.addClusterOn(t, cp, name) }

// addClusterOn creates namespace name on plane and an Argo CD cluster Secret for cluster
// name naming plane, scoped to that namespace. Several Secrets name one control plane:
// their namespaces are disjoint, so each is a logical cluster of its own
// (duplicate-server refuses only overlapping namespaces, docs/safety.md).
func (h *fleetHub) addClusterOn(t *testing.T, plane *controlplane.ControlPlane, name string) {
	t.Helper()
	createNamespace(t, plane.Client(), name)
	secret := plane.ArgoCDClusterSecret(name, name)
	secret.Namespace = h.secrets
	secret.StringData["namespaces"] = name
	_, err := h.kc.CoreV1().Secrets(h.secrets).Create(context.Background(), secret, metav1.CreateOptions{})
	require.NoError(t, err)
	h.planes[name] = plane
}

// client returns a client of the control plane of cluster c (added by addClusterOn).
func (h *fleetHub) client(c string) kubernetes.Interface { return h.planes[c].Client() }

// start starts replica id of the fleet, with extra flags.
func (h *fleetHub) start(t *testing.T, id, prefix string, extra ...string) *service {
	t.Helper()
	port, err := controlplane.FreePort()
	require.NoError(t, err)
	flags := []string{"--log-level", "info", "--watch-namespace", prefix + "-home",
		"--argocd-clusters", h.secrets, "--fleet", "--fleet-namespace", h.leases, "--fleet-shards", strconv.Itoa(fleetShards),
		"--fleet-identity", id, "--fleet-addr", fmt.Sprintf("127.0.0.1:%d", port),
		"--fleet-lease-duration", "6s", "--fleet-renew-deadline", "4s", "--fleet-retry-period", "1s"}
	if !h.unwatched {
		flags = append(flags, "--watch")
	}
	s := startService(t, h.b, append(flags, extra...)...)
	h.replicas[id] = s
	return s
}

// fleetShards is the replicas' --fleet-shards.
const fleetShards = 8

// liveIDs returns the identities of the replicas still running.
func (h *fleetHub) liveIDs() []string {
	var ids []string
	for id, s := range h.replicas {
		select {
		case <-s.done:
		default:
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// asAssigned is nil once every cluster of names (none pinned) is owned by the preferred
// replica of its shard among the live replicas alone: shard.Assign, the function every
// replica computes.
func (h *fleetHub) asAssigned(names []string) error {
	ids := h.liveIDs()
	a := shard.Assign(ids, fleetShards)
	owners := h.owners(names)
	for _, c := range names {
		if want := a.Preferred[shard.Of(c, -1, fleetShards)]; !slices.Equal(owners[c], []string{want}) {
			return fmt.Errorf("cluster %s owned by %v, its shard's preferred replica among %v is %s", c, owners[c], ids, want)
		}
	}
	return nil
}

// owners returns, per cluster name of names, the replicas that say they run it.
func (h *fleetHub) owners(names []string) map[string][]string {
	out := map[string][]string{}
	for id, s := range h.replicas {
		select {
		case <-s.done:
			continue
		default:
		}
		for _, c := range names {
			if v, err := s.metric("configmap_attacher_cluster_owned", map[string]string{"cluster": c}); err == nil && v == 1 {
				out[c] = append(out[c], id)
			}
		}
	}
	return out
}

// exactlyOne is nil once every cluster of names has one owner among the live replicas
// and none reports a cluster without an owner or with two.
func (h *fleetHub) exactlyOne(names []string) error {
	owners := h.owners(names)
	for _, c := range names {
		if len(owners[c]) != 1 {
			return fmt.Errorf("cluster %s owned by %v", c, owners[c])
		}
	}
	for id, s := range h.replicas {
		select {
		case <-s.done:
			continue
		default:
		}
		for _, state := range []string{"unowned", "multiple-owners"} {
			if v, err := s.metric("configmap_attacher_fleet_clusters", map[string]string{"state": state}); err != nil || v != 0 {
				return fmt.Errorf("replica %s: fleet_clusters{state=%s} = %v (%v)", id, state, v, err)
			}
		}
	}
	return nil
}

// settled waits until every cluster of names has had one owner, and every live replica
// has seen the others, for three checks in a row a second apart: the start-up hand-over
// of shards to their preferred replicas is over.
func (h *fleetHub) settled(t *testing.T, names []string, within time.Duration) {
	t.Helper()
	stable := 0
	controlplane.Eventually(t, within, "ownership settled", func() error {
		err := h.exactlyOne(names)
		for id, s := range h.replicas {
			select {
			case <-s.done:
				continue
			default:
			}
			if v, merr := s.metric("configmap_attacher_fleet_members", nil); err == nil && (merr != nil || int(v) != h.live()) {
				err = fmt.Errorf("replica %s sees %v members, %d live", id, v, h.live())
			}
		}
		if err != nil {
			stable = 0
			return err
		}
		if stable++; stable < 3 {
			time.Sleep(time.Second)
			return fmt.Errorf("stable for %d checks", stable)
		}
		return nil
	})
}

func (h *fleetHub) live() int {
	n := 0
	for _, s := range h.replicas {
		select {
		case <-s.done:
		default:
			n++
		}
	}
	return n
}

// notOwner returns a live replica other than the owner of cluster c.
func (h *fleetHub) notOwner(t *testing.T, c string) *service {
	t.Helper()
	require.Len(t, h.owners([]string{c})[c], 1, "cluster %s", c)
	s, err := h.pickNotOwner(c, 0)
	require.NoError(t, err)
	return s
}

// pickNotOwner returns the turn-th (modulo) of the live replicas other than the one
// owner of cluster c, or of all live replicas while c has no live owner (its owner was
// just killed: a Service would send there too); an error when none is left.
func (h *fleetHub) pickNotOwner(c string, turn int) (*service, error) {
	owner := h.owners([]string{c})[c]
	if len(owner) > 1 {
		return nil, fmt.Errorf("cluster %s owned by %v", c, owner)
	}
	owner = append(owner, "")
	ids := make([]string, 0, len(h.replicas))
	for id := range h.replicas {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var others []*service
	for _, id := range ids {
		select {
		case <-h.replicas[id].done:
			continue
		default:
		}
		if id != owner[0] {
			others = append(others, h.replicas[id])
		}
	}
	if len(others) == 0 {
		return nil, fmt.Errorf("no replica but %q is alive", owner[0])
	}
	return others[turn%len(others)], nil
}

// fleetSet creates ConfigMap cm-NAME and ReplicaSet NAME using it in namespace ns.
func fleetSet(t *testing.T, kc kubernetes.Interface, ns, name string) *appsv1.ReplicaSet {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, createConfigMap(ctx, kc, ns, "cm-"+name))
	rs, err := kc.AppsV1().ReplicaSets(ns).Create(ctx, replicaSet(name, "cm-"+name), metav1.CreateOptions{})
	require.NoError(t, err)
	return rs
}

// sendEveryWay sends the ADD of rs (cluster c) to svc over HTTP, gRPC and the EventBus
// and requires the HTTP and gRPC answers to be OK.
func sendEveryWay(t *testing.T, b *bus, svc *service, c string, sets [3]*appsv1.ReplicaSet) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, postHTTP(ctx, svc, c, sets[0]))
	require.NoError(t, executeGRPC(ctx, svc, c, sets[1]))
	require.NoError(t, publishAdd(ctx, b, c, sets[2]))
}

// errRetryLater marks an answer a sender retries (HTTP 429/503, gRPC Unavailable,
// ResourceExhausted, DeadlineExceeded), as an Argo Events Sensor does.
var errRetryLater = errors.New("answered retry-later")

// postHTTP sends the ADD of rs (cluster c) to svc's HTTP receiver; a refused connection
// and a retry-later answer wrap errRetryLater.
func postHTTP(ctx context.Context, svc *service, c string, rs *appsv1.ReplicaSet) error {
	_, body, err := event.ResourceEvent("replicasets", "replicaset-add", "ADD", rs, map[string]string{"cluster": c})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+svc.httpAddr+"/", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/cloudevents+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("HTTP for cluster %s: %w: %w", c, errRetryLater, err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		return fmt.Errorf("HTTP %d for cluster %s: %w: %s", resp.StatusCode, c, errRetryLater, msg)
	}
	return fmt.Errorf("HTTP %d for cluster %s: %s", resp.StatusCode, c, msg)
}

// executeGRPC sends the ADD of rs (cluster c) to svc's gRPC custom trigger; a retry-later
// answer (a refused connection is Unavailable) wraps errRetryLater.
func executeGRPC(ctx context.Context, svc *service, c string, rs *appsv1.ReplicaSet) error {
	_, body, err := event.ResourceEvent("replicasets", "replicaset-add", "ADD", rs, map[string]string{"cluster": c})
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient(svc.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = triggers.NewTriggerClient(conn).Execute(ctx, &triggers.ExecuteRequest{Payload: body})
	switch status.Code(err) {
	case codes.OK:
		return nil
	case codes.Unavailable, codes.ResourceExhausted, codes.DeadlineExceeded:
		return fmt.Errorf("gRPC for cluster %s: %w: %w", c, errRetryLater, err)
	}
	return fmt.Errorf("gRPC for cluster %s: %w", c, err)
}

// publishAdd publishes the ADD of rs (cluster c) on the EventBus, as an EventSource does.
func publishAdd(ctx context.Context, b *bus, c string, rs *appsv1.ReplicaSet) error {
	pub := &eventsource.Publisher{JS: b.js, EventSourceName: "replicasets", EventName: "replicaset-add", Metadata: map[string]string{"cluster": c}}
	return pub.Publish(ctx, "ADD", rs)
}

// attachedIn is nil once every ReplicaSet of sets owns its ConfigMap.
func attachedIn(kc kubernetes.Interface, sets []*appsv1.ReplicaSet) error {
	for _, rs := range sets {
		cm, err := kc.CoreV1().ConfigMaps(rs.Namespace).Get(context.Background(), "cm-"+rs.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		found := false
		for _, o := range cm.OwnerReferences {
			found = found || o.UID == rs.UID
		}
		if !found {
			return fmt.Errorf("%s/%s not attached", rs.Namespace, rs.Name)
		}
	}
	return nil
}

// TestAFleetOwnsEveryClusterOnceAndAnswersFromAnyReplica: three real `serve` processes
// share 13 clusters (the home cluster and 12 Argo CD cluster Secrets scoped to a
// namespace each) on shard Leases. Every cluster has exactly one owner; an event sent
// over HTTP, gRPC and the EventBus to a replica that does not own its cluster is
// answered OK (forwarded) and attached once; the replica owning the most clusters is
// SIGKILLed and its clusters are owned again within 30 s, the ReplicaSets created
// meanwhile attached; a cluster added is owned and one removed is dropped within 30 s;
// nothing is deleted.
func TestAFleetOwnsEveryClusterOnceAndAnswersFromAnyReplica(t *testing.T) {
	const n = 12
	fleetRuns++
	prefix := fmt.Sprintf("fleet%d", fleetRuns) // -count=N runs on one control plane
	b := newBus(t)
	h := newFleetHub(t, b, prefix, n)
	names := []string{"in-cluster"}
	for i := range n {
		names = append(names, fmt.Sprintf("%s-c%d", prefix, i))
	}
	for _, id := range []string{"r-a", "r-b", "r-c"} {
		h.start(t, id, prefix)
	}
	h.settled(t, names, 120*time.Second)
	rate := leaseRate(t, 10*time.Second)
	t.Logf("Lease requests with 3 replicas, 8 shards, %d clusters: %.1f/s (the control plane's own included)", len(names), rate)
	assert.Less(t, rate, 50.0, "Lease requests per second")
	watches := map[string]*ownerWatch{}
	var all []*appsv1.ReplicaSet
	for _, c := range names[1:] {
		watches[c] = watchOwners(t, h.kc, c)
		sets := [3]*appsv1.ReplicaSet{fleetSet(t, h.kc, c, "rs-http"), fleetSet(t, h.kc, c, "rs-grpc"), fleetSet(t, h.kc, c, "rs-bus")}
		sendEveryWay(t, b, h.notOwner(t, c), c, sets)
		all = append(all, sets[:]...)
	}
	controlplane.Eventually(t, 90*time.Second, "every ReplicaSet attached, the stream acked", func() error {
		if err := attachedIn(h.kc, all); err != nil {
			return err
		}
		return b.idle()
	})
	var forwarded float64
	for _, s := range h.replicas {
		v, err := s.metric("configmap_attacher_events_forwarded_total", map[string]string{"result": "ok"})
		require.NoError(t, err)
		forwarded += v
	}
	assert.GreaterOrEqual(t, forwarded, float64(2*n), "HTTP and gRPC events answered by their cluster's owner")
	for c, w := range watches {
		_, twice, _ := w.summary()
		assert.Zero(t, twice, "cluster %s: ConfigMaps written twice: %v", c, w.twiceWritten())
	}

	victim, victimClusters := h.busiest(names)
	h.replicas[victim].kill()
	killed := time.Now()
	var late []*appsv1.ReplicaSet
	for _, c := range victimClusters {
		if c != "in-cluster" {
			late = append(late, fleetSet(t, h.kc, c, "rs-late"))
		}
	}
	controlplane.Eventually(t, 30*time.Second, "the killed replica's clusters owned again", func() error { return h.exactlyOne(names) })
	t.Logf("SIGKILLed %s (owner of %d clusters): owned again after %s", victim, len(victimClusters), time.Since(killed).Round(100*time.Millisecond))
	controlplane.Eventually(t, 60*time.Second, "the ReplicaSets created meanwhile attached", func() error { return attachedIn(h.kc, late) })
	t.Logf("%d ReplicaSets created meanwhile attached after %s", len(late), time.Since(killed).Round(100*time.Millisecond))

	added := prefix + "-cnew"
	h.addCluster(t, added)
	names = append(names, added)
	controlplane.Eventually(t, 30*time.Second, "an added cluster owned", func() error { return h.exactlyOne(names) })
	removed := names[1]
	require.NoError(t, h.kc.CoreV1().Secrets(h.secrets).Delete(context.Background(), removed, metav1.DeleteOptions{}))
	controlplane.Eventually(t, 30*time.Second, "a removed cluster dropped", func() error {
		if o := h.owners([]string{removed})[removed]; len(o) > 0 {
			return fmt.Errorf("still run by %v", o)
		}
		return nil
	})
	h.joins(t, slices.DeleteFunc(slices.Clone(names), func(c string) bool { return c == removed }), "r-d", prefix)
	for c, w := range watches {
		assert.Zero(t, w.deletions(), "cluster %s: ConfigMaps deleted", c)
	}
}

// joins starts replica id (with extra flags) once every cluster of names is owned as
// assigned, and requires that they are owned as assigned with it: the clusters that move
// are those of the shards shard.Assign moves (to the new replica, and the few that
// balancing shifts between the others, bounded in internal/shard's tests). It returns
// how many moved.
func (h *fleetHub) joins(t *testing.T, names []string, id, prefix string, extra ...string) int {
	t.Helper()
	controlplane.Eventually(t, 60*time.Second, "every cluster owned as assigned", func() error { return h.asAssigned(names) })
	before := h.owners(names)
	h.start(t, id, prefix, extra...)
	after := h.rebalanced(t, names)
	moved, toNew := 0, 0
	for _, c := range names {
		if before[c][0] != after[c][0] {
			moved++
			if after[c][0] == id {
				toNew++
			}
		}
	}
	t.Logf("replica %s joined %d: %d of %d clusters moved, %d of them to it", id, h.live()-1, moved, len(names), toNew)
	return moved
}

// leaseRate measures the Lease requests per second the apiserver serves over d.
func leaseRate(t *testing.T, d time.Duration) float64 {
	t.Helper()
	api := newAPIRequests(t)
	count := func() int {
		n := 0
		for _, verb := range []string{"GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE"} {
			n += api.count(t, verb, "leases", "")
		}
		return n
	}
	before, start := count(), time.Now()
	time.Sleep(d)
	return float64(count()-before) / time.Since(start).Seconds()
}

// fleetRuns numbers the runs of the fleet test in this process.
var fleetRuns int

// busiest returns the live replica owning the most clusters of names, and those.
func (h *fleetHub) busiest(names []string) (string, []string) {
	by := map[string][]string{}
	for c, ids := range h.owners(names) {
		for _, id := range ids {
			by[id] = append(by[id], c)
		}
	}
	best := ""
	for id, cs := range by {
		if best == "" || len(cs) > len(by[best]) || (len(cs) == len(by[best]) && id < best) {
			best = id
		}
	}
	return best, by[best]
}
