package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
)

// TestBreakRunWithBadGCOptions: RunWith documents "Errors: an ingress that cannot be
// built (bad options, ErrInvalid)". Sweeper options that gc.NewSweeper rejects must end
// RunWith with that error, not leave a serve that is ready and never sweeps (or answers
// every `operation: gc` "not started") with only a log line per cluster.
func TestBreakRunWithBadGCOptions(t *testing.T) {
	c := controlplane.Require(t, cp)
	for name, in := range map[string]server.Ingress{
		"negative interval": {GC: &server.GCOptions{Interval: -time.Second, Options: gc.DefaultOptions()}},
		"negative keep":     {GC: &server.GCOptions{Interval: time.Minute, Options: gc.Options{Keep: -1}}},
	} {
		t.Run(name, func(t *testing.T) {
			srv, err := server.New(c.RESTConfig(), server.Options{GRPCAddr: "-", HTTPAddr: "127.0.0.1:0", Logger: logger(t),
				ShutdownTimeout: 5 * time.Second})
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			err = srv.RunWith(ctx, in)
			require.Error(t, err, "RunWith ran until its context ended")
			assert.ErrorIs(t, err, core.ErrInvalid)
		})
	}
}
