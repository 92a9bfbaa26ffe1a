package gc_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// The namespace policy holds for on-demand sweeps: an excluded namespace is refused
// before anything is read, dry run or not.
func TestSweepNamespaceHonoursNamespacePolicy(t *testing.T) {
	kc := fake.NewClientset()
	policy, err := core.ParseNamespacePolicy(nil, core.DefaultExcludedNamespaces("configmap-attacher"))
	require.NoError(t, err)
	att, err := core.NewAttacher(core.Config{Client: kc, Reader: core.LiveReader{Client: kc}, Namespaces: policy})
	require.NoError(t, err)
	src := &countingSource{}
	sw, err := gc.NewSweeper(gc.Config{Client: kc, Source: src, Attacher: att})
	require.NoError(t, err)
	for _, ns := range []string{"kube-system", "kube-public", "configmap-attacher"} {
		_, err := sw.SweepNamespace(context.Background(), ns)
		require.ErrorIs(t, err, core.ErrRefused, ns)
		_, err = sw.SweepNamespaceDryRun(context.Background(), ns)
		require.ErrorIs(t, err, core.ErrRefused, ns)
	}
	assert.Zero(t, src.snapshots(""), "nothing is read")
}

// countingSource serves empty namespaces and counts the snapshots read of each.
type countingSource struct {
	mu   sync.Mutex
	byNS map[string]int
}

func (c *countingSource) Snapshot(_ context.Context, ns string) (*gc.Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byNS == nil {
		c.byNS = map[string]int{}
	}
	c.byNS[ns]++
	return &gc.Snapshot{Namespace: ns}, nil
}

func (c *countingSource) Namespaces(context.Context) ([]string, error) { return nil, nil }

// snapshots returns the snapshots read of ns, or of every namespace when ns is "".
func (c *countingSource) snapshots(ns string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.byNS {
		if ns == "" || k == ns {
			n += v
		}
	}
	return n
}

// A burst of attaches in a namespace (a Trigger each) costs one sweep of it, after the
// trigger delay, however many triggers came meanwhile; a trigger after that sweep gets
// a sweep of its own.
func TestTriggersOfOneNamespaceCoalesceIntoOneSweep(t *testing.T) {
	src := &countingSource{}
	sw, err := gc.NewSweeper(gc.Config{Client: fake.NewClientset(), Source: src, Interval: time.Hour, TriggerDelay: 2 * time.Second})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sw.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	for range 50 {
		sw.Trigger("shop")
		sw.Trigger("blog")
		time.Sleep(4 * time.Millisecond)
	}
	controlplane.Eventually(t, 10*time.Second, "the triggered sweeps", func() error {
		if n := src.snapshots(""); n < 2 {
			return fmt.Errorf("%d sweeps", n)
		}
		return nil
	})
	assert.Equal(t, 1, src.snapshots("shop"), "50 triggers of shop, one sweep")
	assert.Equal(t, 1, src.snapshots("blog"), "50 triggers of blog, one sweep")
	sw.Trigger("shop")
	controlplane.Eventually(t, 10*time.Second, "the next trigger's sweep", func() error {
		if n := src.snapshots("shop"); n != 2 {
			return fmt.Errorf("%d sweeps of shop", n)
		}
		return nil
	})
}

// A negative trigger delay is refused.
func TestNegativeTriggerDelayIsInvalid(t *testing.T) {
	_, err := gc.NewSweeper(gc.Config{Client: fake.NewClientset(), Source: &countingSource{}, TriggerDelay: -time.Second})
	require.ErrorIs(t, err, core.ErrInvalid)
}

// A trigger before Run is swept once Run runs; a sweep still due when Run stops is
// dropped (the next start or the periodic sweep covers it), none runs after Run has
// returned, and a trigger after the stop waits for the next Run (docs/design.md,
// "Per-cluster cost": the triggered sweeps are timers, not goroutines).
func TestTriggeredSweepsRunOnlyWhileTheSweeperRuns(t *testing.T) {
	src := &countingSource{}
	sw, err := gc.NewSweeper(gc.Config{Client: fake.NewClientset(), Source: src, Namespaces: []string{"periodic"},
		Interval: time.Hour, TriggerDelay: 50 * time.Millisecond})
	require.NoError(t, err)
	sw.Trigger("early")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sw.Run(ctx) }()
	controlplane.Eventually(t, 10*time.Second, "the trigger before Run swept", func() error {
		if n := src.snapshots("early"); n != 1 {
			return fmt.Errorf("%d sweeps of early", n)
		}
		return nil
	})
	slow, err := gc.NewSweeper(gc.Config{Client: fake.NewClientset(), Source: src, Namespaces: []string{"periodic"},
		Interval: time.Hour, TriggerDelay: time.Hour})
	require.NoError(t, err)
	slowCtx, slowCancel := context.WithCancel(context.Background())
	slowDone := make(chan error, 1)
	go func() { slowDone <- slow.Run(slowCtx) }()
	controlplane.Eventually(t, 10*time.Second, "the periodic sweeps begun", func() error {
		if !slow.IsLeader() {
			return fmt.Errorf("not running")
		}
		return nil
	})
	slow.Trigger("due-at-stop")
	slowCancel()
	require.NoError(t, <-slowDone, "Run returns at once: the due sweep is dropped, not waited for")
	cancel()
	require.NoError(t, <-done)
	sw.Trigger("after-stop")
	time.Sleep(200 * time.Millisecond) // four trigger delays: a sweep would have run
	assert.Zero(t, src.snapshots("due-at-stop"), "a sweep due at the stop ran")
	assert.Zero(t, src.snapshots("after-stop"), "a trigger after the stop was swept without Run")
}
