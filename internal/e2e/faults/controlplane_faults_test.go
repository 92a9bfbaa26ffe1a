package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// controlPlaneFault is a part of the control plane taken away for a few seconds.
type controlPlaneFault struct {
	name       string
	stop       func(*controlplane.ControlPlane) error
	start      func(*controlplane.ControlPlane) error
	resetsAPIM bool // the apiserver's own counters restart from zero
}

// TestControlPlaneUnavailableCatchesUp: etcd, or kube-apiserver, is stopped for a few
// seconds while ADDs arrive on the EventBus, then started again with the same data and
// ports. The service is not restarted: what it could not handle is held or Nak'ed and
// redelivered with a growing delay, and once the control plane is back every ReplicaSet is
// attached, none lost and none written twice. /readyz must report not-ready while the
// cluster is down (it probes the cluster) and ready again afterwards.
func TestControlPlaneUnavailableCatchesUp(t *testing.T) {
	faults := []controlPlaneFault{
		{name: "etcd", stop: (*controlplane.ControlPlane).StopEtcd,
			start: func(c *controlplane.ControlPlane) error { return c.RestartEtcd(context.Background()) }},
		{name: "kube-apiserver", stop: (*controlplane.ControlPlane).StopAPIServer,
			start: func(c *controlplane.ControlPlane) error { return c.RestartAPIServer(context.Background()) }, resetsAPIM: true},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) { testControlPlaneFault(t, f) })
	}
}

func testControlPlaneFault(t *testing.T, f controlPlaneFault) {
	const n, first = 200, 100
	c := controlplane.Require(t, cp)
	b := newBus(t)
	w := newWorkload(t, f.name+"-down", n)
	owners := watchOwners(t, w.kc, w.ns)
	api := newAPIRequests(t)
	svc := startService(t, b, "--log-level", "warn")
	// The second half of the ReplicaSets is created once the first is attached: the
	// service's first attach starts its Deployment and Rollout caches, whose sync makes
	// the revision side go over every ConfigMap once more (docs/design.md, "Per-cluster
	// cost"); created before, the second half would be attached then, not after the fault.
	firstBatch := &workload{ns: w.ns, kc: w.kc, sets: w.sets[:first]}
	firstBatch.createSets(t)
	require.NoError(t, <-publishPaced(b, firstBatch, 0))
	controlplane.Eventually(t, 120*time.Second, "the first 100 attached", func() error {
		if _, err := firstBatch.attached(context.Background()); err != nil {
			return err
		}
		return b.idle()
	})
	(&workload{ns: w.ns, kc: w.kc, sets: w.sets[first:], base: first}).createSets(t)
	ok0 := api.count(t, "PATCH", "configmaps", "200")
	naks0, err := svc.metric("configmap_attacher_eventbus_messages_total", map[string]string{"result": "nak"})
	require.NoError(t, err)

	require.NoError(t, f.stop(c))
	restarted := false
	t.Cleanup(func() {
		if !restarted { // never leave the package's control plane broken
			_ = f.start(c)
		}
	})
	stopped := time.Now()
	rest := &workload{ns: w.ns, kc: w.kc, sets: w.sets[first:]}
	require.NoError(t, <-publishPaced(b, rest, 0))
	readyCodes := map[int]int{}
	var readyBody string
	for time.Since(stopped) < 6*time.Second {
		code, body := svc.get("/readyz")
		readyCodes[code]++
		if code != http.StatusOK {
			readyBody = clip(strings.TrimSpace(body), 90)
		}
		time.Sleep(250 * time.Millisecond)
	}
	_, _, whileDown := owners.summary()
	require.NoError(t, f.start(c))
	restarted = true
	down := time.Since(stopped)
	back := time.Now()
	naks, err := svc.metric("configmap_attacher_eventbus_messages_total", map[string]string{"result": "nak"})
	require.NoError(t, err)
	t.Logf("%s down %s with %d events published meanwhile; attached while down: %d; Naks: %d; /readyz while down: %v %q",
		f.name, down.Round(time.Millisecond), n-first, whileDown-first, int(naks-naks0), readyCodes, readyBody)

	controlplane.Eventually(t, 240*time.Second, "every ReplicaSet attached and the stream acked", func() error {
		if _, err := w.attached(context.Background()); err != nil {
			return err
		}
		return b.idle()
	})
	caughtUp := time.Since(back)
	controlplane.Eventually(t, 60*time.Second, "the watch to see every write", func() error {
		if once, _, _ := owners.summary(); once < n {
			return fmt.Errorf("%d seen", once)
		}
		return nil
	})
	once, twice, _ := owners.summary()
	ok := api.count(t, "PATCH", "configmaps", "200")
	if !f.resetsAPIM {
		ok -= ok0
	}
	naks, err = svc.metric("configmap_attacher_eventbus_messages_total", map[string]string{"result": "nak"})
	require.NoError(t, err)
	t.Logf("after %s came back: %d/%d attached %s later, %d written once, %d twice, %d successful PATCHes for the %d new, %d Naks in all",
		f.name, n, n, caughtUp.Round(time.Millisecond), once, twice, ok, n-first, int(naks-naks0))
	assert.Equal(t, n, once)
	assert.Zero(t, twice, "none written twice: %v", owners.twiceWritten())
	if f.resetsAPIM {
		// The restarted apiserver counts from zero: the PATCHes the old one served while it
		// was stopping (the attaches the watch saw before the restart) died with its metrics.
		assert.LessOrEqual(t, ok, n-whileDown, "at most one successful PATCH per ConfigMap attached after the restart")
	} else {
		assert.Equal(t, n-first, ok, "one successful PATCH per new ConfigMap")
	}
	assert.Zero(t, owners.deletions(), "nothing deleted")
	assert.Positive(t, readyCodes[http.StatusServiceUnavailable], "/readyz reported not-ready while %s was down", f.name)
	controlplane.Eventually(t, 60*time.Second, "/readyz to be 200 again", func() error {
		if code, body := svc.get("/readyz"); code != http.StatusOK {
			return fmt.Errorf("%d %s", code, clip(body, 200))
		}
		return nil
	})
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
