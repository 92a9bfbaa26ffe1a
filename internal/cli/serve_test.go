package cli

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestServeOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*ServeOptions)
		ok     bool
	}{
		{"defaults", func(*ServeOptions) {}, true},
		{"both servers disabled", func(o *ServeOptions) { o.Listeners.GRPCAddr, o.Listeners.HTTPAddr = "-", "-" }, false},
		{"cert without key", func(o *ServeOptions) { o.Listeners.TLSCertFile = "tls.crt" }, false},
		{"zero in flight", func(o *ServeOptions) { o.Limits.MaxInFlight = 0 }, false},
		{"zero timeout", func(o *ServeOptions) { o.Limits.ExecuteTimeout = 0 }, false},
		{"tiny body limit", func(o *ServeOptions) { o.Limits.MaxBodyBytes = 10 }, false},
		{"negative ReplicaSet wait", func(o *ServeOptions) { o.Limits.ReplicaSetWait = -time.Second }, false},
		{"no ReplicaSet wait", func(o *ServeOptions) { o.Limits.ReplicaSetWait = 0 }, true},
		{"one server", func(o *ServeOptions) { o.Listeners.HTTPAddr = "-"; o.Limits.ExecuteTimeout = time.Second }, true},
		{"profiling on loopback", func(o *ServeOptions) { o.Listeners.ProfilingAddr = "127.0.0.1:6060" }, true},
		{"profiling on every interface", func(o *ServeOptions) { o.Listeners.ProfilingAddr = ":6060" }, false},
		{"profiling on a routable address", func(o *ServeOptions) { o.Listeners.ProfilingAddr = "10.0.0.1:6060" }, false},
		{"pprof without the token", func(o *ServeOptions) { o.Listeners.Pprof = true }, false},
		{"pprof behind the token", func(o *ServeOptions) { o.Listeners.Pprof, o.Security.HTTPTokenFile = true, "token" }, true},
		{"pprof without the ops listener", func(o *ServeOptions) {
			o.Listeners.Pprof, o.Security.HTTPTokenFile, o.Listeners.MetricsAddr = true, "token", "-"
		}, false},
		{"the ops listener alone serves probes", func(o *ServeOptions) { o.Listeners.HTTPAddr = "-" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultServeOptions()
			tc.mutate(&o)
			err := o.Validate()
			if tc.ok {
				assert.NoError(t, err)
				return
			}
			var ue usageError
			assert.ErrorAs(t, err, &ue)
		})
	}
}

func TestServeCommandFlags(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"serve", "--help"}, Streams{Out: &out, Err: &errb})
	assert.Equal(t, ExitOK, code, errb.String())
	for _, f := range []string{"--grpc-addr", "--http-addr", "--kubeconfig", "--context", "--tls-cert-file", "--tls-key-file",
		"--max-in-flight", "--execute-timeout", "--allow-secrets", "--block-owner-deletion", "--log-level", "--log-format", "--profiling-addr", "--metrics-addr", "--pprof"} {
		assert.Contains(t, out.String(), f)
	}
	code = Main(context.Background(), []string{"serve", "--max-in-flight", "0"}, Streams{Out: &out, Err: &errb})
	assert.Equal(t, ExitUsage, code)
}

func TestReplicaSetWaitFlagReachesTheCaches(t *testing.T) {
	for _, tc := range []struct {
		name string
		flag time.Duration
		want time.Duration // cache.Options.ReplicaSetWait: negative is no wait
	}{
		{"default: one second", DefaultServeOptions().Limits.ReplicaSetWait, time.Second},
		{"zero: no wait", 0, -1},
		{"set", 300 * time.Millisecond, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultServeOptions()
			o.Limits.ReplicaSetWait = tc.flag
			assert.Equal(t, tc.want, o.ServerOptions().ReplicaSetWait)
		})
	}
}
