package eventbus_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
)

// over returns a quiet dispatcher over clusters, as serve builds one.
func over(t testing.TB, clusters dispatch.Clusters) *dispatch.Dispatcher {
	t.Helper()
	d, err := dispatch.New(dispatch.Config{Clusters: clusters, Logger: quiet})
	require.NoError(t, err)
	return d
}

// observed is a dispatcher that tells fn every answer but ignored ones.
type observed struct {
	*dispatch.Dispatcher
	fn func(dispatch.Answer)
}

func (o observed) Dispatch(ctx context.Context, req dispatch.Request) dispatch.Answer {
	a := o.Dispatcher.Dispatch(ctx, req)
	o.fn(a)
	return a
}

func (o observed) Reject(ctx context.Context, path dispatch.Path, ev core.Event, err error) dispatch.Answer {
	a := o.Dispatcher.Reject(ctx, path, ev, err)
	if a.Class != dispatch.ClassIgnored {
		o.fn(a)
	}
	return a
}
