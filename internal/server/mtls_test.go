package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/argoproj/argo-events/pkg/sensors/triggers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/configmap-attacher/configmap-attacher/internal/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
)

// miniCA issues certificates for the mutual TLS test.
type miniCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newMiniCA(t *testing.T, cn string) *miniCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &miniCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a PEM certificate and key for cn with the given usage.
func (ca *miniCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// TestServeMutualTLS: with a client CA, gRPC and HTTP accept only clients presenting a
// certificate signed by it; no certificate, or one from another CA, is refused at the
// handshake.
func TestServeMutualTLS(t *testing.T) {
	controlplane.Require(t, cp)
	dir := t.TempDir()
	ca, rogue := newMiniCA(t, "clients-ca"), newMiniCA(t, "rogue-ca")
	srvCert, srvKey := ca.issue(t, "configmap-attacher", x509.ExtKeyUsageServerAuth)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o600))
		return p
	}
	opts := server.Options{TLSCertFile: write("tls.crt", srvCert), TLSKeyFile: write("tls.key", srvKey), TLSClientCAFile: write("ca.crt", ca.pem)}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.pem)
	pair := func(c *miniCA) []tls.Certificate {
		cp, kp := c.issue(t, "sensor", x509.ExtKeyUsageClientAuth)
		cert, err := tls.X509KeyPair(cp, kp)
		require.NoError(t, err)
		return []tls.Certificate{cert}
	}
	good := &tls.Config{RootCAs: roots, Certificates: pair(ca)}
	s := startServer(t, opts, nil, "https", &http.Client{Transport: &http.Transport{TLSClientConfig: good}})
	_, port, _ := net.SplitHostPort(s.GRPCAddr())

	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		ok   bool
	}{
		{"client certificate from the CA", good, true},
		{"no client certificate", &tls.Config{RootCAs: roots}, false},
		{"client certificate from another CA", &tls.Config{RootCAs: roots, Certificates: pair(rogue)}, false},
	} {
		t.Run("http/"+tc.name, func(t *testing.T) {
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc.cfg}, Timeout: 5 * time.Second}
			resp, err := c.Get("https://" + s.HTTPAddr() + "/healthz")
			if tc.ok {
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, 200, resp.StatusCode)
				return
			}
			if err == nil {
				resp.Body.Close()
			}
			assert.Error(t, err, "refused at the handshake")
		})
		t.Run("grpc/"+tc.name, func(t *testing.T) {
			conn, err := grpc.NewClient("localhost:"+port, grpc.WithTransportCredentials(credentials.NewTLS(tc.cfg)))
			require.NoError(t, err)
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err = triggers.NewTriggerClient(conn).FetchResource(ctx, &triggers.FetchResourceRequest{Resource: []byte("dryRun: true")})
			if tc.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err, "refused at the handshake")
			}
		})
	}
}
