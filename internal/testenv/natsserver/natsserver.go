// Package natsserver runs an embedded NATS server with JetStream on loopback, for tests,
// benchmarks and the local development mode.
//
// The server always serves TLS with a throwaway self-signed certificate generated at start,
// because Argo Events' JetStream client always dials with TLS (it skips verification when
// its EventBus config carries no TLS settings). Go clients in this project can trust the
// certificate through [Server.ClientTLSConfig] or [Server.CAFile].
package natsserver

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/freeport"
)

// Options configures an embedded NATS server. The zero value is a usable default: a free
// loopback port, a temporary JetStream store removed on Stop, and no authentication.
type Options struct {
	// Host is the listen address; default 127.0.0.1.
	Host string
	// Port is the client port; 0 picks a free port.
	Port int
	// StoreDir is the JetStream store directory. Empty means a temporary directory that
	// Stop removes.
	StoreDir string
	// Token, when set, requires clients to authenticate with this token.
	Token string
	// User and Password, when set, require clients to authenticate with them.
	// Token and User/Password are mutually exclusive.
	User     string
	Password string
	// ReadyTimeout bounds the wait for the server to accept connections; default 10s.
	ReadyTimeout time.Duration
	// Logs enables the server's own logging to stderr (noisy; off by default).
	Logs bool
}

// Server is a running embedded NATS server with JetStream and TLS.
type Server struct {
	opts      Options
	ns        *server.Server
	dir       string // working directory (certificates, temporary store)
	removeDir bool
	certPool  *x509.CertPool
	caFile    string
	port      int
	// sopts are the server options, kept so that Restart brings back the same server.
	sopts *server.Options
}

// Start starts a NATS server with JetStream and TLS and waits until it accepts clients.
// The context bounds only the start; call Stop (or use Run) to shut it down.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Token != "" && (opts.User != "" || opts.Password != "") {
		return nil, errors.New("natsserver: token and user/password auth are mutually exclusive")
	}
	if (opts.User == "") != (opts.Password == "") {
		return nil, errors.New("natsserver: user and password must be set together")
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 10 * time.Second
	}
	dir, err := os.MkdirTemp("", "natsserver-")
	if err != nil {
		return nil, fmt.Errorf("natsserver: create work dir: %w", err)
	}
	s := &Server{opts: opts, dir: dir, removeDir: true}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()

	certFile, keyFile, pool, err := selfSignedCert(dir, opts.Host)
	if err != nil {
		return nil, err
	}
	s.certPool, s.caFile = pool, certFile
	tlsConfig, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		return nil, fmt.Errorf("natsserver: tls config: %w", err)
	}

	port := opts.Port
	if port == 0 {
		if port, err = freePort(opts.Host); err != nil {
			return nil, err
		}
	}
	storeDir := opts.StoreDir
	if storeDir == "" {
		storeDir = filepath.Join(dir, "jetstream")
	}
	sopts := &server.Options{
		ServerName:    "configmap-attacher-dev",
		Host:          opts.Host,
		Port:          port,
		JetStream:     true,
		StoreDir:      storeDir,
		TLS:           true,
		TLSConfig:     tlsConfig,
		TLSTimeout:    5,
		NoSigs:        true,
		NoLog:         !opts.Logs,
		MaxPayload:    8 << 20,
		Authorization: opts.Token,
		Username:      opts.User,
		Password:      opts.Password,
	}
	s.sopts = sopts
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// start runs a server with s.sopts and waits until it accepts clients.
func (s *Server) start(ctx context.Context) error {
	ns, err := server.NewServer(s.sopts.Clone())
	if err != nil {
		return fmt.Errorf("natsserver: new server: %w", err)
	}
	if s.opts.Logs {
		ns.ConfigureLogger()
	}
	s.ns = ns
	go ns.Start()

	deadline := s.opts.ReadyTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < deadline {
		deadline = time.Until(d)
	}
	if !ns.ReadyForConnections(deadline) {
		return fmt.Errorf("natsserver: not ready for connections within %s", deadline)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("natsserver: start: %w", err)
	}
	addr, ok := ns.Addr().(*net.TCPAddr)
	if !ok {
		return fmt.Errorf("natsserver: unexpected listen address %v", ns.Addr())
	}
	s.port = addr.Port
	return nil
}

// Shutdown stops the server as a crash or restart of the EventBus would, keeping its
// port, certificate, credentials and JetStream store for Restart. Clients see the
// connection drop. It is a no-op when the server is not running.
func (s *Server) Shutdown() {
	if s == nil || s.ns == nil {
		return
	}
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	s.ns = nil
}

// Restart starts the server again after Shutdown (shutting it down first if it runs) on
// the same port with the same certificate, credentials and JetStream store (streams,
// consumers and their acknowledged positions survive), and waits until it accepts
// clients. Errors: the port was taken meanwhile, the store cannot be read, ctx ended.
func (s *Server) Restart(ctx context.Context) error {
	if s.sopts == nil {
		return errors.New("natsserver: Restart before Start")
	}
	s.Shutdown()
	o := *s.sopts
	o.Port = s.port
	s.sopts = &o
	return s.start(ctx)
}

// Run starts a server and serves until ctx is cancelled, then stops it. ready, if not
// nil, is called once the server accepts clients.
func Run(ctx context.Context, opts Options, ready func(*Server)) error {
	s, err := Start(ctx, opts)
	if err != nil {
		return err
	}
	defer s.Stop()
	if ready != nil {
		ready(s)
	}
	<-ctx.Done()
	return nil
}

// Stop shuts the server down, waits for it and removes temporary files. It is safe to
// call more than once.
func (s *Server) Stop() {
	if s == nil {
		return
	}
	if s.ns != nil {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
		s.ns = nil
	}
	if s.removeDir && s.dir != "" {
		_ = os.RemoveAll(s.dir)
		s.dir = ""
	}
}

// Port is the client port the server listens on.
func (s *Server) Port() int { return s.port }

// ClientURL is the URL clients dial, e.g. nats://127.0.0.1:4222 (TLS is negotiated by the
// server's INFO, so the scheme stays nats://, which is what Argo Events' EventBus config uses).
func (s *Server) ClientURL() string {
	return "nats://" + net.JoinHostPort(s.opts.Host, strconv.Itoa(s.port))
}

// CAFile is the PEM file of the server's self-signed certificate, for clients that take a
// CA file (it is removed on Stop).
func (s *Server) CAFile() string { return s.caFile }

// ClientTLSConfig is a TLS client configuration that trusts the server's certificate.
func (s *Server) ClientTLSConfig() *tls.Config {
	return &tls.Config{RootCAs: s.certPool, MinVersion: tls.VersionTLS12}
}

// Options returns the options the server runs with (with defaults applied).
func (s *Server) Options() Options { return s.opts }

// Connect opens a client connection with TLS verification against the server's
// certificate and the server's credentials; extra options are applied after those.
func (s *Server) Connect(extra ...nats.Option) (*nats.Conn, error) {
	opts := []nats.Option{nats.Secure(s.ClientTLSConfig()), nats.Name("configmap-attacher")}
	switch {
	case s.opts.Token != "":
		opts = append(opts, nats.Token(s.opts.Token))
	case s.opts.User != "":
		opts = append(opts, nats.UserInfo(s.opts.User, s.opts.Password))
	}
	nc, err := nats.Connect(s.ClientURL(), append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("natsserver: connect %s: %w", s.ClientURL(), err)
	}
	return nc, nil
}

// freePort picks a free TCP port on host, below the ephemeral range (package freeport).
func freePort(host string) (int, error) {
	port, err := freeport.On(host)
	if err != nil {
		return 0, fmt.Errorf("natsserver: pick a free port: %w", err)
	}
	return port, nil
}

// selfSignedCert writes a fresh ECDSA self-signed certificate valid for host, localhost,
// 127.0.0.1 and ::1 into dir, and returns the file names and a pool trusting it.
func selfSignedCert(dir, host string) (certFile, keyFile string, pool *x509.CertPool, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", nil, fmt.Errorf("natsserver: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return "", "", nil, fmt.Errorf("natsserver: serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "configmap-attacher dev NATS"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
	} else if host != "" {
		tmpl.DNSNames = append(tmpl.DNSNames, host)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", nil, fmt.Errorf("natsserver: create certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", nil, fmt.Errorf("natsserver: marshal key: %w", err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", nil, fmt.Errorf("natsserver: write certificate: %w", err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", nil, fmt.Errorf("natsserver: write key: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return "", "", nil, fmt.Errorf("natsserver: parse certificate: %w", err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool, nil
}
