package clusters_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

func breakLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("test", t.Name())
	}
	return testfix.Quiet()
}

// breakServe is one in-process serve over a registry of several clusters.
type breakServe struct {
	srv    *server.Server
	addr   string
	cancel context.CancelFunc
	done   chan error
}

// startBreakServe runs a server with ingress in over a registry built from ro until stop (or
// the test's end) and waits until it is ready.
func startBreakServe(t *testing.T, ro cluster.Options, in server.Ingress) *breakServe {
	t.Helper()
	return startBreakServeIn(t, ro, in, "")
}

// startBreakServeIn is startBreakServe with the caches limited to namespace ns
// (serve --watch-namespace).
func startBreakServeIn(t *testing.T, ro cluster.Options, in server.Ingress, ns string) *breakServe {
	t.Helper()
	ro.Logger = breakLogger(t)
	if ro.ProbeInterval == 0 {
		ro.ProbeInterval = 200 * time.Millisecond
	}
	if ro.ProbeTimeout == 0 {
		ro.ProbeTimeout = time.Second
	}
	srv, err := server.New(nil, server.Options{Clusters: &ro, Ingress: in, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", Logger: ro.Logger,
		ShutdownTimeout: 5 * time.Second, HTTPToken: []byte(breakToken), Namespace: ns})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	s := &breakServe{srv: srv, addr: srv.HTTPAddr(), cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- srv.Run(ctx) }()
	t.Cleanup(func() { s.stop(t) })
	controlplane.Eventually(t, 30*time.Second, "/readyz 200", func() error {
		if code, body := s.get("/readyz"); code != http.StatusOK {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return nil
	})
	return s
}

// breakToken is the bearer token of the tests' servers: /readyz shows its detail (one
// line per cluster) only to a request carrying it.
const breakToken = "break-token"

// authClient sends breakToken with every request.
var authClient = &http.Client{Transport: bearer{token: breakToken, next: http.DefaultTransport}}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// stop ends serve and requires a clean, prompt return (idempotent).
func (s *breakServe) stop(t *testing.T) {
	t.Helper()
	if s.done == nil {
		return
	}
	s.cancel()
	select {
	case err := <-s.done:
		assert.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Error("serve did not stop within 30s")
	}
	s.done = nil
}

func (s *breakServe) get(path string) (int, string) {
	resp, err := authClient.Get("http://" + s.addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// gcDryRun sends an `operation: gc` dry-run event for namespace ns of clusterName and
// returns the HTTP status and body.
func (s *breakServe) gcDryRun(t *testing.T, clusterName, ns string) (int, string) {
	t.Helper()
	q := url.Values{"operation": {"gc"}, "cluster": {clusterName}, "namespace": {ns}, "dryRun": {"true"}}
	body := `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"any","namespace":"` + ns + `"}}`
	resp, err := authClient.Post("http://"+s.addr+"/?"+q.Encode(), "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// warmUsers starts cluster clusterName's on-demand user informers (package cache,
// lazyUsers) and waits until they have synced, by a dry-run sweep of a namespace of cp
// holding one revision. A test that counts goroutines takes its baseline after it: that
// cluster's first attach or sweep later on (the start-up replay of the revisions other
// tests left on the shared control plane, a periodic sweep) is then no false leak.
func (s *breakServe) warmUsers(t *testing.T, cp *controlplane.ControlPlane, clusterName string) {
	t.Helper()
	ns := uniq("warm-" + clusterName)
	createNamespace(t, cp, ns)
	_, err := cp.Client().CoreV1().ConfigMaps(ns).Create(context.Background(), testfix.Revision(ns, "warm"), metav1.CreateOptions{})
	require.NoError(t, err)
	if code, body := s.gcDryRun(t, clusterName, ns); code != http.StatusOK {
		t.Fatalf("dry-run sweep of %s in %s: %d %s", clusterName, ns, code, body)
	}
}

// downButReady waits (up to timeout) until /readyz reports cluster name down, checks that
// serve stays ready meanwhile (a non-default cluster down does not make it unready) and
// that an operation: gc for name in ns is answered 503; it returns that answer's body.
func (s *breakServe) downButReady(t *testing.T, name, ns string, timeout time.Duration) string {
	t.Helper()
	controlplane.Eventually(t, timeout, name+" reported down", func() error {
		if code, body := s.get("/readyz"); !strings.Contains(body, name+" DOWN") {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return nil
	})
	for range 6 {
		code, body := s.get("/readyz")
		assert.Equal(t, http.StatusOK, code, "%s down does not make serve unready: %s", name, body)
		time.Sleep(250 * time.Millisecond)
	}
	code, body := s.gcDryRun(t, name, ns)
	assert.Equal(t, http.StatusServiceUnavailable, code, body)
	return body
}

// eventBroadcasters counts the running Kubernetes Event broadcasters of this process
// (one goroutine in watch.(*Broadcaster).loop each).
func eventBroadcasters() int {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return strings.Count(b.String(), "k8s.io/apimachinery/pkg/watch.(*Broadcaster).loop(")
}

var breakRun atomic.Int64

// uniq makes a test's namespace names unique per run (go test -count=N reuses the
// control planes).
func uniq(name string) string { return fmt.Sprintf("%s-%d", name, breakRun.Load()) }

func createNamespace(t *testing.T, cp *controlplane.ControlPlane, ns string) {
	t.Helper()
	_, err := cp.Client().CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// TestArgoCDSecretChangesWhileServing: one Argo CD cluster Secret is renamed and
// re-pointed between the two control planes repeatedly while serve --watch runs a
// watcher and a sweeper per cluster. After every change an `operation: gc` for the
// Secret's current cluster name is answered by the sweeper of the cluster the Secret
// now points at (never by a stale one of the old registration), the old name is
// unknown, and in the end no ConfigMap got an owner from the other cluster.
func TestArgoCDSecretChangesWhileServing(t *testing.T) {
	a, b := newRun(t)
	ctx := context.Background()
	ns, argocd := uniq("break-flip"), uniq("break-flip-argocd")
	createNamespace(t, a, argocd)
	rsA, ownersA := testfix.ListedFixture(t, a, ns, "web", "cfg-web")
	rsB, ownersB := testfix.ListedFixture(t, b, ns, "web", "cfg-web")
	orphan(t, a, ns, "orphan-in-a")
	orphan(t, b, ns, "orphan-in-b")

	base := eventBroadcasters()
	s := startBreakServe(t, hubOptions(a, argocd), server.Ingress{Watch: true, WatchResync: time.Hour,
		// Sweeps run but delete nothing (MinAge), so dry runs keep listing the orphans.
		GC: &server.GCOptions{Interval: 300 * time.Millisecond, Options: gc.Options{MinAge: time.Hour, Keep: 0}}})

	secrets := a.Client().CoreV1().Secrets(argocd)
	sec := clusterSecret(b, argocd, "member", "member-0")
	createSecret(t, a, sec)

	expectServedBy := func(name string, cp *controlplane.ControlPlane) {
		t.Helper()
		want, other := "orphan-in-a", "orphan-in-b"
		if cp == b {
			want, other = other, want
		}
		controlplane.Eventually(t, 30*time.Second, name+" swept in "+cp.Name(), func() error {
			code, body := s.gcDryRun(t, name, ns)
			if code != http.StatusOK || !strings.Contains(body, want) || strings.Contains(body, other) {
				return fmt.Errorf("gc %s: %d %s", name, code, body)
			}
			return nil
		})
	}
	expectServedBy("member-0", b)

	planes := []*controlplane.ControlPlane{b, a}
	toA := testfix.NewCutProxy(t, strings.TrimPrefix(a.ServerURL(), "https://"))
	const changes = 8
	for i := 1; i <= changes; i++ {
		cp := planes[i%2]
		// A fresh ReplicaSet for the new registration to attach: its Event starts the
		// registration's broadcaster (started with the first Event).
		_, ownersI := testfix.ListedFixture(t, cp, ns, fmt.Sprintf("web-%d", i), fmt.Sprintf("cfg-web-%d", i))
		cur, err := secrets.Get(ctx, "member", metav1.GetOptions{})
		require.NoError(t, err)
		fresh := cp.ArgoCDClusterSecret("member", fmt.Sprintf("member-%d", i))
		if cp == a {
			// Not the hub's address (one server under two names would be refused): a loopback proxy.
			fresh.StringData["server"] = "https://" + toA.Addr()
		}
		cur.Data = nil
		cur.StringData = fresh.StringData
		_, err = secrets.Update(ctx, cur, metav1.UpdateOptions{})
		require.NoError(t, err)
		expectServedBy(fmt.Sprintf("member-%d", i), cp)
		code, body := s.gcDryRun(t, fmt.Sprintf("member-%d", i-1), ns)
		assert.Equal(t, http.StatusBadRequest, code, "the old name is unknown: %s", body)
		controlplane.Eventually(t, 30*time.Second, fmt.Sprintf("web-%d attached", i), func() error {
			if len(ownersI(t)) == 0 {
				return errors.New("no owner yet")
			}
			return nil
		})
	}

	// Both watchers attached each cluster's own ReplicaSet only.
	controlplane.Eventually(t, 30*time.Second, "each cfg-web owned by its own cluster's ReplicaSet", func() error {
		if oa, ob := ownersA(t), ownersB(t); !slices.Equal(oa, []string{string(rsA.UID)}) || !slices.Equal(ob, []string{string(rsB.UID)}) {
			return fmt.Errorf("a: %v, b: %v", oa, ob)
		}
		return nil
	})
	assert.True(t, exists(t, a, ns, "orphan-in-a"), "MinAge 1h: nothing deleted")
	assert.True(t, exists(t, b, ns, "orphan-in-b"), "MinAge 1h: nothing deleted")

	// Still one registration of the Secret's cluster: the Event broadcasters of the
	// replaced registrations were stopped, not leaked (one per change). At most three
	// run: the hub's, the member's current registration's and the registry's own (Argo
	// CD Secret warnings), each started with its first Event.
	t.Run("no Event broadcaster leaked per change", func(t *testing.T) {
		controlplane.Eventually(t, 10*time.Second, "broadcasters back to one registration's", func() error {
			if n := eventBroadcasters() - base; n > 3 {
				return fmt.Errorf("%d Event broadcasters running after %d changes of one Secret, at most 3 expected", n, changes)
			}
			return nil
		})
	})
}

// TestServeStopsItsEventBroadcasters: a serve with two clusters, once stopped,
// leaves no Event broadcaster running (each is a goroutine and a watch channel).
func TestServeStopsItsEventBroadcasters(t *testing.T) {
	a, b := newRun(t)
	ns := uniq("break-stop")
	// A ReplicaSet in each cluster for the watcher to attach: its Event starts that
	// cluster's broadcaster (started with the first Event).
	testfix.ListedFixture(t, a, ns, "web", "cfg-web")
	testfix.ListedFixture(t, b, ns, "web", "cfg-web")
	before := eventBroadcasters()
	s := startBreakServe(t, cluster.Options{Clusters: []cluster.Spec{
		{Name: "a", Source: cluster.SourceHome, Origin: "test", Config: a.RESTConfig()},
		{Name: "b", Source: cluster.SourceKubeconfig, Origin: "test", Config: b.RESTConfig()},
	}}, server.Ingress{Watch: true, WatchResync: time.Hour})
	controlplane.Eventually(t, 30*time.Second, "both sweepers started", func() error {
		for _, c := range []string{"a", "b"} {
			if code, body := s.gcDryRun(t, c, "default"); code != http.StatusOK {
				return fmt.Errorf("gc %s: %d %s", c, code, body)
			}
		}
		return nil
	})
	controlplane.Eventually(t, 30*time.Second, "both clusters' broadcasters started", func() error {
		if n := eventBroadcasters(); n < before+2 {
			return fmt.Errorf("%d Event broadcasters running, %d before", n, before)
		}
		return nil
	})
	s.stop(t)
	controlplane.Eventually(t, 10*time.Second, "no Event broadcaster left", func() error {
		if n := eventBroadcasters(); n > before {
			return fmt.Errorf("%d Event broadcasters still running after serve stopped (%d before)", n, before)
		}
		return nil
	})
}

// sweeps returns how many namespace sweeps s's sweeper of clusterName has run (any result).
func (s *breakServe) sweeps(t *testing.T, clusterName string) float64 {
	t.Helper()
	mfs, err := s.srv.Dispatcher().Metrics().Registry.Gather()
	require.NoError(t, err)
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "configmap_attacher_gc_sweeps_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "cluster" && l.GetValue() == clusterName {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// TestLeaderElectionTwoReplicasTwoClusters: two serve replicas with --leader-elect
// and two clusters. For each cluster exactly one replica runs the periodic sweeps (the
// holder of that cluster's Lease, all Leases in the default cluster); when that replica
// stops, the other takes over every cluster.
func TestLeaderElectionTwoReplicasTwoClusters(t *testing.T) {
	a, b := newRun(t)
	ctx := context.Background()
	ns, leaseNS := uniq("break-le"), uniq("break-le-leases")
	createNamespace(t, a, leaseNS)
	createNamespace(t, a, ns)
	createNamespace(t, b, ns)
	// One young revision per cluster: every periodic sweep has a namespace to sweep and
	// deletes nothing.
	orphan(t, a, ns, "young")
	orphan(t, b, ns, "young")
	// Not the default cluster's name as the Lease suffix: b is named "Member_B" (not a
	// valid object name, so its Lease name is hashed).
	const memberName = "Member_B"
	replica := func() *breakServe {
		return startBreakServeIn(t, cluster.Options{Clusters: []cluster.Spec{
			{Name: "a", Source: cluster.SourceHome, Origin: "test", Config: a.RESTConfig()},
			{Name: memberName, Source: cluster.SourceKubeconfig, Origin: "test", Config: b.RESTConfig()},
		}}, server.Ingress{GC: &server.GCOptions{Interval: 200 * time.Millisecond,
			Options: gc.Options{MinAge: time.Hour}, LeaseNamespace: leaseNS}}, ns)
	}
	r1, r2 := replica(), replica()
	names := []string{"a", memberName}
	leases := map[string]string{"a": server.LeaseName("a", true), memberName: server.LeaseName(memberName, false)}
	require.NotEqual(t, leases["a"], leases[memberName])
	controlplane.Eventually(t, 60*time.Second, "both Leases held", func() error {
		for _, n := range names {
			l, err := a.Client().CoordinationV1().Leases(leaseNS).Get(ctx, leases[n], metav1.GetOptions{})
			if err != nil {
				return err
			}
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
				return fmt.Errorf("Lease %s not held", leases[n])
			}
		}
		return nil
	})
	controlplane.Eventually(t, 30*time.Second, "every cluster swept by a leader", func() error {
		for _, n := range names {
			if r1.sweeps(t, n)+r2.sweeps(t, n) == 0 {
				return fmt.Errorf("cluster %q not swept yet", n)
			}
		}
		return nil
	})
	// Over a few intervals, for each cluster exactly one replica sweeps periodically.
	time.Sleep(time.Second)
	for _, n := range names {
		got := []float64{r1.sweeps(t, n), r2.sweeps(t, n)}
		assert.True(t, (got[0] > 0) != (got[1] > 0), "cluster %q: exactly one replica sweeps, got sweeps r1=%v r2=%v", n, got[0], got[1])
	}
	_, err := b.Client().CoordinationV1().Leases(leaseNS).Get(ctx, leases[memberName], metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no Lease in the member cluster: %v", err)

	// r1 goes; r2 takes over every cluster (r1 releases its Leases on shutdown).
	before := map[string]float64{}
	for _, n := range names {
		before[n] = r2.sweeps(t, n)
	}
	r1.stop(t)
	controlplane.Eventually(t, 40*time.Second, "r2 sweeps every cluster", func() error {
		for _, n := range names {
			if r2.sweeps(t, n) <= before[n] {
				return fmt.Errorf("r2 does not sweep %q yet", n)
			}
		}
		return nil
	})
	assert.True(t, exists(t, a, ns, "young"))
	assert.True(t, exists(t, b, ns, "young"))
}

// TestDeadArgoCDClusterKeepsServeReady: an Argo CD cluster Secret pointing at an
// apiserver that is not there registers a cluster whose caches never sync. serve --watch
// --gc-interval stays ready (200, naming the dead cluster), the hub keeps working, an
// `operation: gc` for the dead cluster is a retryable 503 at once, and deleting the
// Secret stops its pending per-cluster work (gc for it is then an unknown cluster) and
// lets serve stop promptly.
func TestDeadArgoCDClusterKeepsServeReady(t *testing.T) {
	a, _ := newRun(t)
	ctx := context.Background()
	ns, argocd := uniq("break-dead"), uniq("break-dead-argocd")
	createNamespace(t, a, argocd)
	s := startBreakServe(t, hubOptions(a, argocd), server.Ingress{Watch: true, WatchResync: time.Hour, GC: &server.GCOptions{Interval: 200 * time.Millisecond,
		Options: gc.Options{MinAge: time.Hour}, LeaseNamespace: "default"}})

	port, err := controlplane.FreePort()
	require.NoError(t, err)
	dead := clusterSecret(a, argocd, "dead", "dead")
	dead.StringData["server"] = fmt.Sprintf("https://127.0.0.1:%d", port) // nothing listens
	secrets := a.Client().CoreV1().Secrets(argocd)
	createSecret(t, a, dead)
	body := s.downButReady(t, "dead", ns, 30*time.Second)
	assert.Contains(t, body, `cluster \"dead\"`)

	// The hub still works: its watcher attaches.
	rs, owners := testfix.ListedFixture(t, a, ns, "web", "cfg-web")
	controlplane.Eventually(t, 30*time.Second, "the hub's watcher attaches", func() error {
		if o := owners(t); !slices.Equal(o, []string{string(rs.UID)}) {
			return fmt.Errorf("owners %v", o)
		}
		return nil
	})
	code, body := s.gcDryRun(t, "hub", ns)
	assert.Equal(t, http.StatusOK, code, body)

	require.NoError(t, secrets.Delete(ctx, "dead", metav1.DeleteOptions{}))
	controlplane.Eventually(t, 30*time.Second, "dead unregistered", func() error {
		code, body := s.gcDryRun(t, "dead", ns)
		if code != http.StatusBadRequest || !strings.Contains(body, "unknown cluster") {
			return fmt.Errorf("gc dead: %d %s", code, body)
		}
		return nil
	})
	code, body = s.get("/readyz")
	assert.Equal(t, http.StatusOK, code, body)
	assert.NotContains(t, body, "dead")
	// The Lease of a cluster that never synced was never taken.
	_, err = a.Client().CoordinationV1().Leases("default").Get(ctx, server.LeaseName("dead", false), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no Lease for a cluster whose sweeper never started: %v", err)
	s.stop(t)
}

// TestMemberApiserverDownWhileWatchingAndSweeping: serve --watch --gc-interval
// --leader-elect with clusters a (default) and b; b's apiserver stops. serve stays
// ready throughout (200, naming b as down), a's watcher keeps attaching, gc for b is a
// retryable 503; once b is back its watcher attaches again by itself and its sweeper
// answers.
func TestMemberApiserverDownWhileWatchingAndSweeping(t *testing.T) {
	a, b := newRun(t)
	ctx := context.Background()
	ns, leaseNS := namespace(t, b, "break-bdown"), namespace(t, a, "break-bdown-leases")
	s := startBreakServe(t, cluster.Options{Clusters: []cluster.Spec{
		{Name: "a", Source: cluster.SourceHome, Origin: "test", Config: a.RESTConfig()},
		{Name: "b", Source: cluster.SourceKubeconfig, Origin: "test", Config: b.RESTConfig()},
	}}, server.Ingress{Watch: true, WatchResync: time.Hour, GC: &server.GCOptions{Interval: 300 * time.Millisecond,
		Options: gc.Options{MinAge: time.Hour}, LeaseNamespace: leaseNS}})
	controlplane.Eventually(t, 30*time.Second, "b's sweeper started", func() error {
		if code, body := s.gcDryRun(t, "b", ns); code != http.StatusOK {
			return fmt.Errorf("gc b: %d %s", code, body)
		}
		return nil
	})

	require.NoError(t, b.StopAPIServer())
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			assert.NoError(t, b.RestartAPIServer(ctx))
		}
	})
	s.downButReady(t, "b", ns, 15*time.Second)
	rsA, ownersA := testfix.ListedFixture(t, a, ns, "web-down", "cfg-down")
	controlplane.Eventually(t, 30*time.Second, "a's watcher attaches while b is down", func() error {
		if o := ownersA(t); !slices.Equal(o, []string{string(rsA.UID)}) {
			return fmt.Errorf("owners %v", o)
		}
		return nil
	})

	require.NoError(t, b.RestartAPIServer(ctx))
	restarted = true
	controlplane.Eventually(t, 60*time.Second, "b ok again", func() error {
		if code, body := s.get("/readyz"); code != http.StatusOK || !strings.Contains(body, "b ok") {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return nil
	})
	rsB, ownersB := testfix.ListedFixture(t, b, ns, "web-back", "cfg-back")
	controlplane.Eventually(t, 60*time.Second, "b's watcher attaches after b's return", func() error {
		if o := ownersB(t); !slices.Equal(o, []string{string(rsB.UID)}) {
			return fmt.Errorf("owners %v", o)
		}
		return nil
	})
	code, body := s.gcDryRun(t, "b", ns)
	assert.Equal(t, http.StatusOK, code, body)
	code, body = s.get("/readyz")
	assert.Equal(t, http.StatusOK, code, body)
}
