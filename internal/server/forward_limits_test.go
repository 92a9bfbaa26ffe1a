package server

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// TestForwardingEndpointBoundsSlowClients: the forwarding endpoint listens on the pod
// network like the receivers and must bound a client that sends its body or headers
// slowly, or keeps idle connections, as the receivers and the ops listener do
// (ReadTimeout, IdleTimeout, MaxHeaderBytes): with ReadHeaderTimeout alone a caller
// without the token trickling a body holds a goroutine and a file descriptor for good.
func TestForwardingEndpointBoundsSlowClients(t *testing.T) {
	d, err := dispatch.New(dispatch.Config{Clusters: noClusters{}, Logger: testfix.Quiet()})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer lis.Close()
	f := newForwardServer(lis, d, nil, []byte("s3cret"), nil, testfix.Quiet())
	assert.Positive(t, f.srv.ReadHeaderTimeout)
	assert.Positive(t, f.srv.ReadTimeout, "a slow body is bounded")
	assert.Positive(t, f.srv.IdleTimeout, "an idle connection is bounded")
	assert.Positive(t, f.srv.MaxHeaderBytes, "headers are bounded below net/http's 1 MiB default")
	assert.LessOrEqual(t, f.srv.MaxHeaderBytes, 64<<10)
}
