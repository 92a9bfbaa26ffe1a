package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
	"github.com/configmap-attacher/configmap-attacher/trigger"
)

// TestFleetForwardingPassesTheServicesMutualTLS: with mutual TLS (--tls-client-ca-file)
// a replica forwards to the owner presenting the service's serving certificate as its
// client certificate; the owner must accept it whatever signed it and whatever usages
// it names, or every forwarded event is answered retry-later for good. The owner's
// answer here: the cluster is unknown (invalid), not unavailable.
func TestFleetForwardingPassesTheServicesMutualTLS(t *testing.T) {
	clients, serving := testfix.NewCA(t, "clients-ca"), testfix.NewCA(t, "serving-ca")
	tests := []struct {
		name  string
		ca    *testfix.CA
		usage []x509.ExtKeyUsage
	}{
		{name: "serving certificate from the client CA, any usage", ca: clients},
		{name: "serving certificate from the client CA, server auth only", ca: clients, usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		{name: "serving certificate from another CA (cert-manager's issuer)", ca: serving, usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			write := func(name string, b []byte) string {
				p := filepath.Join(dir, name)
				require.NoError(t, os.WriteFile(p, b, 0o600))
				return p
			}
			cert, key := tt.ca.Issue(t, "configmap-attacher", tt.usage...)
			base, err := trigger.LoadTLS(write("tls.crt", cert), write("tls.key", key))
			require.NoError(t, err)
			tlsCfg, err := trigger.WithClientCA(base, write("ca.crt", clients.PEM))
			require.NoError(t, err)
			d, err := dispatch.New(dispatch.Config{Clusters: noClusters{}, Logger: testfix.Quiet()})
			require.NoError(t, err)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			srv := newForwardServer(lis, d, tlsCfg, nil, nil, testfix.Quiet())
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- srv.Run(ctx) }()
			defer func() { cancel(); <-done }()
			req := dispatch.Request{Path: dispatch.PathHTTP, Options: core.DefaultOptions(),
				Event: core.Event{Cluster: "prod", Namespace: "shop", Name: "web-1"}}
			a, err := newForwardClient(tlsCfg, nil).Forward(ctx, lis.Addr().String(), req)
			require.NoError(t, err)
			assert.Equal(t, dispatch.ClassInvalid, a.Class, "the owner's answer: %v", a.Err)

			// Anyone else is refused at the handshake: no certificate, or one the client
			// CA did not sign.
			rogueCert, rogueKey := testfix.NewCA(t, "rogue-ca").Issue(t, "configmap-attacher", x509.ExtKeyUsageClientAuth)
			rogue, err := trigger.LoadTLS(write("rogue.crt", rogueCert), write("rogue.key", rogueKey))
			require.NoError(t, err)
			for name, certs := range map[string][]tls.Certificate{"no certificate": nil, "another CA's": rogue.Certificates} {
				c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: certs}}}
				resp, err := c.Post("https://"+lis.Addr().String()+ForwardPath, "application/json", strings.NewReader("{}"))
				if err == nil {
					resp.Body.Close()
				}
				assert.Error(t, err, "%s: refused at the handshake", name)
			}
		})
	}
}
