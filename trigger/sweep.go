package trigger

import (
	"context"
	"fmt"
)

// SweepFunc runs an orphan sweep of one namespace of one cluster for a trigger with
// `operation: gc` and returns a JSON-encodable report and a one-line summary.
type SweepFunc func(ctx context.Context, cluster, namespace string, dryRun bool) (report any, summary string, err error)

// AfterAttachFunc is told about every attach that wrote something (cluster, namespace),
// so the caller can schedule a sweep of that namespace.
type AfterAttachFunc func(cluster, namespace string)

// SetSweeper enables `operation: gc` (without it such events are ErrUnsupported) and the
// after-attach notification. Call it before serving.
func (s *Service) SetSweeper(sweep SweepFunc, after AfterAttachFunc) {
	s.sweep, s.afterAttach = sweep, after
}

// gc handles an `operation: gc` event: it sweeps the namespace the event's ReplicaSet is
// in (or the spec's namespace) in the event's cluster.
func (s *Service) gc(ctx context.Context, cluster, namespace string, dryRun bool, resp *Response) error {
	if s.sweep == nil {
		err := fmt.Errorf("%w: operation %q needs the orphan sweeper (configmap-attacher serve runs one per cluster)", ErrUnsupported, "gc")
		resp.Message = err.Error()
		return err
	}
	report, summary, err := s.sweep(ctx, cluster, namespace, dryRun)
	resp.GC = report
	resp.Message = summary
	if err != nil && summary == "" {
		resp.Message = err.Error()
	}
	return err
}
