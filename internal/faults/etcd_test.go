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

	"github.com/configmap-attacher/configmap-attacher/internal/controlplane"
)

// TestEtcdUnavailableCatchesUp: etcd is stopped for a few seconds while ADDs arrive on
// the EventBus (kube-apiserver keeps running and fails or stalls what needs etcd), then
// started again with the same data. The service is not restarted: the messages it could
// not handle are Nak'ed and redelivered with a growing delay, and once etcd is back every
// ReplicaSet is attached, none lost and none written twice. /readyz is recorded while
// etcd is down (it reports cache sync only, so it stays 200).
func TestEtcdUnavailableCatchesUp(t *testing.T) {
	const n, first = 200, 100
	c := controlplane.Require(t, cp)
	b := newBus(t)
	w := newWorkload(t, "etcd-down", n)
	owners := watchOwners(t, w.kc, w.ns)
	api := newAPIRequests(t)
	svc := startService(t, b, "--log-level", "warn")

	firstBatch := &workload{ns: w.ns, kc: w.kc, sets: w.sets[:first]}
	require.NoError(t, <-publishPaced(b, firstBatch, 0))
	controlplane.Eventually(t, 120*time.Second, "the first 100 attached", func() error {
		if _, err := firstBatch.attached(context.Background()); err != nil {
			return err
		}
		return b.idle()
	})
	ok0 := api.count(t, "PATCH", "configmaps", "200")
	naks0, err := svc.metric("configmap_attacher_eventbus_messages_total", map[string]string{"result": "nak"})
	require.NoError(t, err)

	require.NoError(t, c.StopEtcd())
	restarted := false
	t.Cleanup(func() {
		if !restarted { // never leave the package's control plane without etcd
			_ = c.RestartEtcd(context.Background())
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
	require.NoError(t, c.RestartEtcd(context.Background()))
	restarted = true
	down := time.Since(stopped)
	back := time.Now()
	naks, err := svc.metric("configmap_attacher_eventbus_messages_total", map[string]string{"result": "nak"})
	require.NoError(t, err)
	t.Logf("etcd down %s with %d events published meanwhile; attached while down: %d; Naks: %d; /readyz while down: %v %q",
		down.Round(time.Millisecond), n-first, whileDown-first, int(naks-naks0), readyCodes, readyBody)

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
	ok := api.count(t, "PATCH", "configmaps", "200") - ok0
	naks, err = svc.metric("configmap_attacher_eventbus_messages_total", map[string]string{"result": "nak"})
	require.NoError(t, err)
	t.Logf("after etcd came back: %d/%d attached %s later, %d written once, %d twice, %d successful PATCHes for the %d new, %d Naks in all",
		n, n, caughtUp.Round(time.Millisecond), once, twice, ok, n-first, int(naks-naks0))
	assert.Equal(t, n, once)
	assert.Zero(t, twice, "none written twice: %v", owners.twiceWritten())
	assert.Equal(t, n-first, ok, "one successful PATCH per new ConfigMap")
	assert.Zero(t, owners.deletions(), "nothing deleted")
	assert.Positive(t, readyCodes[http.StatusServiceUnavailable], "/readyz reported not-ready while etcd was down")
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
