// Package eventbus connects to an Argo Events EventBus (NATS JetStream) the way Argo
// Events' own clients do: a token or user/password (the EventBus accessSecret) and TLS.
package eventbus

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Conn describes an EventBus connection.
type Conn struct {
	// URL of the NATS server(s), comma separated (nats://host:4222).
	URL  string
	Auth Auth
	TLS  TLS
	// Name is the client name shown by the server; default "configmap-attacher".
	Name string
}

// Auth is how a client authenticates to NATS, as Argo Events' EventBus does:
// a token, or a user and password (Argo keeps them in the EventBus's accessSecret).
type Auth struct {
	Token    string
	User     string
	Password string
}

// TLS configures the connection. Argo Events' own clients always dial TLS and skip
// verification when no CA is configured; these clients verify unless told otherwise.
type TLS struct {
	CAFile             string
	CertFile, KeyFile  string
	InsecureSkipVerify bool
	// Disable dials plain TCP (only for a NATS server without TLS).
	Disable bool
}

// ErrUnreachable marks a connection failure that may pass (the EventBus is not up yet,
// restarting, its name does not resolve yet, a timeout): retry later. It also wraps
// core.ErrUnavailable so that callers mapping errors to answers treat it as transient.
var ErrUnreachable = fmt.Errorf("EventBus unreachable (%w)", core.ErrUnavailable)

// Refused reports whether a connection error is the EventBus refusing this client
// (authentication, authorization, TLS verification or a TLS requirement mismatch): a
// configuration problem that retrying does not fix.
func Refused(err error) bool {
	for _, e := range []error{nats.ErrAuthorization, nats.ErrAuthExpired, nats.ErrAuthRevoked, nats.ErrAccountAuthExpired,
		nats.ErrSecureConnRequired, nats.ErrSecureConnWanted, nats.ErrClientCertOrRootCAsRequired} {
		if errors.Is(err, e) {
			return true
		}
	}
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var header tls.RecordHeaderError
	var alert tls.AlertError
	// A TLS alert from the server (e.g. "certificate required" under mutual TLS) reaches a
	// TCP client as a net.OpError "remote error: tls: ...", its alert type unexported.
	var op *net.OpError
	remoteTLS := errors.As(err, &op) && op.Op == "remote error" || strings.Contains(err.Error(), "remote error: tls:")
	return errors.As(err, &unknownAuthority) || errors.As(err, &hostname) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &header) || errors.As(err, &alert) || remoteTLS ||
		strings.Contains(strings.ToLower(err.Error()), "authorization violation")
}

// certRequired reports the other face of a server that requires a client certificate
// (mutual TLS) to a client that has none: under TLS 1.3 the handshake completes on the
// client's side before the server checks the certificate, so the client may see its
// first write fail on a connection the server closed instead of the server's alert.
func certRequired(err error) bool {
	return strings.Contains(err.Error(), "connection closed by remote after TLS handshake")
}

// Connect dials the EventBus described by c, reconnecting forever, and logs
// disconnects and reconnects to log. A dial failure wraps core.ErrUnavailable.
func Connect(c Conn, log *slog.Logger) (*nats.Conn, error) {
	if c.Name == "" {
		c.Name = "configmap-attacher"
	}
	opts := []nats.Option{
		nats.Name(c.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("EventBus disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(*nats.Conn) { log.Info("EventBus reconnected") }),
	}
	switch {
	case c.Auth.Token != "":
		opts = append(opts, nats.Token(c.Auth.Token))
	case c.Auth.User != "":
		opts = append(opts, nats.UserInfo(c.Auth.User, c.Auth.Password))
	}
	if !c.TLS.Disable {
		tc, err := c.TLS.Config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Secure(tc))
	}
	nc, err := nats.Connect(c.URL, opts...)
	if err != nil {
		if Refused(err) || c.TLS.CertFile == "" && certRequired(err) {
			return nil, fmt.Errorf("connecting to the EventBus at %s: %w", RedactURL(c.URL), err)
		}
		return nil, fmt.Errorf("connecting to the EventBus at %s: %w: %w", RedactURL(c.URL), ErrUnreachable, err)
	}
	return nc, nil
}

// Config returns the TLS client configuration t describes.
func (t TLS) Config() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: t.InsecureSkipVerify} //nolint:gosec // opt-in, mirrors Argo Events' EventBus clients
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("EventBus CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, core.Invalidf("eventbus-tls-ca-file", "%s holds no PEM certificate", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("EventBus client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// RedactURL drops credentials from a NATS URL before it is logged.
func RedactURL(u string) string {
	var out []string
	for _, part := range strings.Split(u, ",") {
		if i := strings.Index(part, "@"); i >= 0 {
			if j := strings.Index(part, "://"); j >= 0 && j < i {
				part = part[:j+3] + "REDACTED" + part[i:]
			}
		}
		out = append(out, part)
	}
	return strings.Join(out, ",")
}
