package dispatch

import (
	"context"
	"fmt"

	"github.com/configmap-attacher/configmap-attacher/internal/gc"
)

// Sweeps runs orphan sweeps for the dispatcher: `operation: gc` events, and a sweep of a
// namespace after an attach wrote something there. The server's per-cluster sweepers
// implement it.
type Sweeps interface {
	// Sweep sweeps one namespace of one cluster ("" is the default) and returns its
	// report (nil when the sweep could not begin).
	Sweep(ctx context.Context, cluster, namespace string, dryRun bool) (*gc.Report, error)
	// AfterAttach is told about every attach that wrote something; it may schedule a
	// sweep of that namespace (and does nothing when periodic sweeps are off).
	AfterAttach(cluster, namespace string)
}

// gc handles an `operation: gc` event: it sweeps the event's namespace (or the spec's)
// in the event's cluster.
func (d *Dispatcher) gc(ctx context.Context, cluster, namespace string, dryRun bool, resp *Response) error {
	if d.sweeps == nil {
		return fmt.Errorf("%w: operation %q needs the orphan sweeper (configmap-attacher serve runs one per cluster)", ErrUnsupported, "gc")
	}
	report, err := d.sweeps.Sweep(ctx, cluster, namespace, dryRun)
	if report != nil {
		resp.GC, resp.Message = report, fmt.Sprintf("gc %s: %s", namespace, report.Summary())
	}
	return err
}
