package eventbus

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

func selfSigned(t *testing.T, dir string) (certFile string, cert tls.Certificate) {
	certFile, _, cert = testfix.SelfSigned(t, dir)
	return certFile, cert
}

// A NATS server that requires a client certificate (mTLS, a common EventBus hardening)
// rejects a client without one during the TLS handshake. The client sees a TLS alert
// ("remote error: tls: certificate required") or, under TLS 1.3, its first write failing
// on a connection the server closed ("closed by remote after TLS handshake"); both are a
// refusal, not ErrUnreachable, so serve does not retry forever, never ready and never exiting with the
// configuration error.
func TestMissingClientCertIsRefused(t *testing.T) {
	dir := t.TempDir()
	caFile, cert := selfSigned(t, dir)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(mustRead(t, caFile))
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		TLS: true, TLSVerify: true, TLSTimeout: 5,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}})
	require.NoError(t, err)
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	require.True(t, srv.ReadyForConnections(10*time.Second))

	log := testfix.Quiet()
	nc, err := Connect(Conn{URL: srv.ClientURL(), TLS: TLS{CAFile: caFile}}, log)
	if nc != nil {
		nc.Close()
	}
	require.Error(t, err)
	t.Logf("err: %v", err)
	require.False(t, errors.Is(err, ErrUnreachable), "a missing client certificate is a refusal, not a transient failure: %v", err)
}

func mustRead(t *testing.T, f string) []byte {
	t.Helper()
	b, err := os.ReadFile(f)
	require.NoError(t, err)
	return b
}

// Guards: a wrong token and an untrusted server certificate are refusals (serve exits
// with the error); a port where nothing listens is transient (retried).
func TestRefusedClassification(t *testing.T) {
	dir := t.TempDir()
	caFile, cert := selfSigned(t, dir)
	otherCA, _ := selfSigned(t, t.TempDir())
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, Authorization: "right",
		TLS: true, TLSTimeout: 5, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	require.NoError(t, err)
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	require.True(t, srv.ReadyForConnections(10*time.Second))
	log := testfix.Quiet()

	for name, c := range map[string]Conn{
		"wrong token":          {URL: srv.ClientURL(), Auth: Auth{Token: "wrong"}, TLS: TLS{CAFile: caFile}},
		"untrusted server CA":  {URL: srv.ClientURL(), Auth: Auth{Token: "right"}, TLS: TLS{CAFile: otherCA}},
		"TLS disabled, needed": {URL: srv.ClientURL(), Auth: Auth{Token: "right"}, TLS: TLS{Disable: true}},
	} {
		nc, err := Connect(c, log)
		if nc != nil {
			nc.Close()
		}
		require.Error(t, err, name)
		require.False(t, errors.Is(err, ErrUnreachable), "%s must be a refusal: %v", name, err)
		require.True(t, Refused(err), "%s: %v", name, err)
	}
	nc, err := Connect(Conn{URL: srv.ClientURL(), Auth: Auth{Token: "right"}, TLS: TLS{CAFile: caFile}}, log)
	require.NoError(t, err)
	nc.Close()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	_, err = Connect(Conn{URL: "nats://" + addr, TLS: TLS{CAFile: caFile}}, log)
	require.ErrorIs(t, err, ErrUnreachable, "nothing listening is transient")
}
