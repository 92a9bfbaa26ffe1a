package server_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// Sweeper options that gc.NewSweeper rejects fail New with core.ErrInvalid, instead of a
// serve that is ready and never sweeps (or answers every `operation: gc` "not
// started") with only a log line per cluster.
func TestBadGCOptionsFailTheConstructor(t *testing.T) {
	c := controlplane.Require(t, cp)
	for name, in := range map[string]server.Ingress{
		"negative interval": {GC: &server.GCOptions{Interval: -time.Second, Options: gc.DefaultOptions()}},
		"negative keep":     {GC: &server.GCOptions{Interval: time.Minute, Options: gc.Options{Keep: -1}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := server.New(c.RESTConfig(), server.Options{GRPCAddr: "-", HTTPAddr: "127.0.0.1:0", Logger: logger(t),
				ShutdownTimeout: 5 * time.Second, Ingress: in})
			require.Error(t, err)
			assert.ErrorIs(t, err, core.ErrInvalid)
		})
	}
}
