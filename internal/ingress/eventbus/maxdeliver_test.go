package eventbus_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// downCluster answers every event "unavailable".
type downCluster struct{}

func (downCluster) Attacher(string) (*core.Attacher, error) {
	return nil, fmt.Errorf("%w: test cluster down", core.ErrUnavailable)
}

// gaveUp counts GaveUp calls of a dispatcher.
type gaveUp struct {
	*dispatch.Dispatcher
	n atomic.Int64
}

func (g *gaveUp) GaveUp(path dispatch.Path, ev core.Event, reason string, err error) {
	g.n.Add(1)
	g.Dispatcher.GaveUp(path, ev, reason, err)
}

// A raised --eventbus-max-deliver takes effect on a durable consumer created with a
// lower one, and the MaxDeliver-th delivery of a still-transient failure is given up
// and counted, never dropped by the server uncounted.
func TestMaxDeliverIsAppliedAndCounted(t *testing.T) {
	f := newFixture(t, "eventbus-max-deliver")
	ctx := context.Background()
	run := func(maxDeliver int) (*gaveUp, func() error) {
		d := &gaveUp{Dispatcher: over(t, downCluster{})}
		s := f.subscriberTo(d, prometheus.NewRegistry(), func(o *eventbus.SubscriberOptions) {
			o.MaxDeliver, o.NakDelay, o.MaxNakDelay = maxDeliver, 20*time.Millisecond, 40*time.Millisecond
		})
		return d, f.start(s)
	}
	_, stop := run(3)
	require.NoError(t, stop())
	d, _ := run(6)
	info, err := f.js.Consumer(ctx, "default", eventbus.DefaultDurable)
	require.NoError(t, err)
	assert.Equal(t, 7, info.CachedInfo().Config.MaxDeliver, "the new limit (one above the handler's own)")
	rs := f.workload(1, 1)[0]
	require.NoError(t, f.pub.Publish(ctx, "ADD", rs))
	controlplane.Eventually(t, 20*time.Second, "the message given up", func() error {
		if d.n.Load() != 1 {
			return fmt.Errorf("given up %d times", d.n.Load())
		}
		return nil
	})
}
