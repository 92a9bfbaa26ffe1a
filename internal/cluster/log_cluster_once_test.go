package cluster

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// lockedBuffer is a log sink safe for the runtime's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Every log line of a cluster's runtime names the cluster once: the runtime's logger
// and the Attacher's (or the sweep's) each adding it printed `cluster=a cluster=a` on
// "attached" and "collected orphan revision".
func TestRuntimeLogsNameTheClusterOnce(t *testing.T) {
	cp := cpA
	if cp == nil {
		t.Skip("integration test: needs the local control plane (not started with -short)")
	}
	ctx := context.Background()
	ns := fmt.Sprintf("log-cluster-once-%d", time.Now().UnixNano())
	rs := secretFixture(t, cp, ns, "sec", "v")
	_, err := cp.Client().CoreV1().ConfigMaps(ns).Create(ctx, testfix.Revision(ns, "orphan"), metav1.CreateOptions{})
	require.NoError(t, err)
	sink := &lockedBuffer{}
	log := slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug}))
	metrics, err := gc.NewMetrics(prometheus.NewRegistry())
	require.NoError(t, err)
	rt, err := NewRuntime(Spec{Name: "a", Config: cp.RESTConfig()}, RuntimeOptions{Namespace: ns, AllowSecrets: true, Logger: log,
		GC: &SweepOptions{Options: gc.Options{MinAge: 0, Keep: 0}, Metrics: metrics}})
	require.NoError(t, err)
	runSynced(t, rt)
	opts := core.DefaultOptions()
	opts.IncludeSecrets = true
	res, err := rt.Attacher.Attach(ctx, core.Event{Namespace: ns, Name: rs.Name, UID: rs.UID, Options: opts})
	require.NoError(t, err, "%+v", res)
	rep, err := rt.Sweeper.SweepNamespace(ctx, ns)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Count(gc.OutcomeDeleted), "%+v", rep.Results)

	attached, collected := false, false
	for _, line := range strings.Split(sink.String(), "\n") {
		if n := strings.Count(line, `"cluster":`); n > 1 {
			t.Errorf("the cluster is named %d times: %s", n, line)
		}
		attached = attached || strings.Contains(line, `"msg":"attached"`)
		collected = collected || strings.Contains(line, `"msg":"collected orphan revision"`)
	}
	require.True(t, attached && collected, "no attached or collected line logged:\n%s", sink.String())
}
