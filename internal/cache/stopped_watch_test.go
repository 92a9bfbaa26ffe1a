package cache

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
)

// relays counts the goroutines that reduce a watch's events for an informer (this
// package's relay, or watch.Filter's loop that it replaced).
func relays() int {
	var b bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return strings.Count(b.String(), "cache.relayLean(") + strings.Count(b.String(), "watch.(*filteredWatch).loop(")
}

// TestStoppedWatchLeavesNoGoroutine (breaker s7): every watch the reflector ends itself
// (its informer stopped: serve's shutdown, a cluster removed or its credentials
// rotated; a watch it gives up, such as an expired resourceVersion) is stopped after
// the reflector has stopped reading. The goroutine that reduced its events then held
// one it could never hand over and stayed blocked for good (watch.Filter), with the
// object: 4-5 leaked per Argo CD cluster removed (internal/cluster,
// TestClusterAddedRemovedAndReAddedLeavesNothingRunning).
func TestStoppedWatchLeavesNoGoroutine(t *testing.T) {
	before := relays()
	upstream := watch.NewFakeWithChanSize(1, false)
	upstream.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "shop", ResourceVersion: "2"}})
	w, err := leanWatch(func(context.Context, metav1.ListOptions) (watch.Interface, error) { return upstream, nil },
		func(o any) (any, error) { return o, nil })(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	wait4 := func(what string, cond func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return cond(), nil
		})
		require.NoError(t, err, what)
	}
	// The relay has taken the event and waits for a reader that never comes.
	wait4("the relay holds the event", func() bool { return len(upstream.ResultChan()) == 0 })
	w.Stop()
	wait4(fmt.Sprintf("no relay left after Stop (%d before)", before), func() bool { return relays() <= before })
}
