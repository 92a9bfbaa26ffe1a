package server

import (
	"context"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
	"github.com/configmap-attacher/configmap-attacher/trigger"
)

// TestCallersFailingTheForwardingEndpointsTLSAreNotLoggedPerConnection: the forwarding
// endpoint listens on the pod network, where anyone can open connections without a
// token or a certificate. net/http writes one line per failed TLS handshake to its
// ErrorLog, by default the standard library's logger on stderr, outside the service's
// structured logger and its level: a caller opening connections at will wrote as many
// unstructured lines. They go through the service's logger, below the default level.
func TestCallersFailingTheForwardingEndpointsTLSAreNotLoggedPerConnection(t *testing.T) {
	dir := t.TempDir()
	cert, key := testfix.NewCA(t, "serving-ca").Issue(t, "configmap-attacher")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.crt"), cert, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tls.key"), key, 0o600))
	tlsCfg, err := trigger.LoadTLS(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	require.NoError(t, err)

	var stdlog, logs testfix.SyncBuffer
	prev, flags := log.Writer(), log.Flags()
	log.SetOutput(&stdlog)
	defer func() { log.SetOutput(prev); log.SetFlags(flags) }()
	d, err := dispatch.New(dispatch.Config{Clusters: noClusters{}, Logger: testfix.Quiet()})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv := newForwardServer(lis, d, tlsCfg, []byte("s3cret"), nil, logger)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done }()

	const callers = 20
	for range callers { // plain HTTP at a TLS endpoint: each handshake fails
		c, err := net.Dial("tcp", lis.Addr().String())
		require.NoError(t, err)
		_, _ = c.Write([]byte("POST " + ForwardPath + " HTTP/1.1\r\nHost: x\r\n\r\n"))
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, _ = c.Read(make([]byte, 512)) // the server's answer, or its close
		_ = c.Close()
	}
	time.Sleep(100 * time.Millisecond)
	assert.Empty(t, stdlog.String(), "nothing outside the service's logger")
	assert.Less(t, strings.Count(logs.String(), "\n"), callers, "no line per connection at the default level:\n%s", logs.String())
}
