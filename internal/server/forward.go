package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
)

// ForwardPath is the fleet's forwarding endpoint: another replica POSTs an event whose
// cluster this replica owns and gets the answer (docs/design.md, "Fleet").
const ForwardPath = "/fleet/v1/dispatch"

// maxForwardBody bounds a forwarded request (a decoded event: names and a spec).
const maxForwardBody = 64 << 10

// wireRequest is a dispatch.Request between replicas: names, UIDs and the normalised
// spec (core.Options.Spec), never the trusted-listing flag of a one-shot command.
type wireRequest struct {
	Path     dispatch.Path     `json:"path"`
	Spec     map[string]string `json:"spec"`
	Event    wireObject        `json:"event"`
	Revision *wireObject       `json:"revision,omitempty"`
}

type wireObject struct {
	Cluster   string    `json:"cluster,omitempty"`
	Kind      core.Kind `json:"kind,omitempty"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid,omitempty"`
}

// wireAnswer is a dispatch.Answer between replicas: its class, error and response.
type wireAnswer struct {
	Class dispatch.Class `json:"class"`
	Error string         `json:"error,omitempty"`
	Field string         `json:"field,omitempty"`
	// Forbidden: a permanent failure that was RBAC's refusal of a write (Answer.Forbidden).
	Forbidden bool              `json:"forbidden,omitempty"`
	Response  dispatch.Response `json:"response"`
}

func toWire(req dispatch.Request) wireRequest {
	w := wireRequest{Path: req.Path, Spec: req.Options.Spec(),
		Event: wireObject{Cluster: req.Event.Cluster, Namespace: req.Event.Namespace, Name: req.Event.Name, UID: req.Event.UID}}
	if r := req.Revision; r != nil {
		w.Revision = &wireObject{Cluster: r.Cluster, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: r.UID}
	}
	return w
}

// fromWire rebuilds the request on the owner, parsing the spec as any spec from the
// network (ParseSpec: untrusted names stay untrusted).
func fromWire(d *dispatch.Dispatcher, w wireRequest) (dispatch.Request, error) {
	opts, err := d.ParseSpec(w.Spec)
	if err != nil {
		return dispatch.Request{}, err
	}
	req := dispatch.Request{Path: w.Path, Options: opts, Forwarded: true,
		Event: core.Event{Cluster: w.Event.Cluster, Namespace: w.Event.Namespace, Name: w.Event.Name, UID: w.Event.UID}}
	if r := w.Revision; r != nil {
		req.Revision = &core.RevisionEvent{Cluster: r.Cluster, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: r.UID}
	}
	switch req.Path {
	case dispatch.PathGRPC, dispatch.PathHTTP, dispatch.PathEventBus, dispatch.PathWatcher, dispatch.PathRevision:
		return req, nil
	}
	return dispatch.Request{}, core.Invalidf("path", "unknown way in %q", core.Clip(string(w.Path)))
}

// forwardServer answers the events other replicas forward (ForwardPath), behind the
// service's TLS (and client certificates) and bearer token.
type forwardServer struct {
	lis    net.Listener
	srv    *http.Server
	client *forwardClient
	log    *slog.Logger
}

func newForwardServer(lis net.Listener, d *dispatch.Dispatcher, tlsCfg *tls.Config, token []byte, client *forwardClient, log *slog.Logger) *forwardServer {
	f := &forwardServer{lis: lis, client: client, log: log.With("component", "forward")}
	mux := http.NewServeMux()
	mux.Handle("POST "+ForwardPath, requireToken(token, forwardHandler(d)))
	// The HTTP receiver's limits (trigger.NewHTTPServer): a slow or idle client is bounded.
	f.srv = &http.Server{Handler: mux, TLSConfig: forwardServerTLS(tlsCfg), ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10, ErrorLog: httpErrorLog(f.log)}
	return f
}

// httpErrorLog is an http.Server's ErrorLog through the service's logger. net/http
// writes there one line per connection that fails its TLS handshake or is cut: what any
// caller on the network can cause at will, so Debug, not the standard library's logger
// on stderr; a handler's panic stays an Error.
func httpErrorLog(l *slog.Logger) *log.Logger {
	return log.New(httpErrorWriter{l}, "", 0)
}

type httpErrorWriter struct{ l *slog.Logger }

func (w httpErrorWriter) Write(p []byte) (int, error) {
	msg, level := strings.TrimSpace(string(p)), slog.LevelDebug
	if strings.HasPrefix(msg, "http: panic serving") {
		level = slog.LevelError
	}
	w.l.Log(context.Background(), level, msg)
	return len(p), nil
}

// forwardServerTLS is the forwarding endpoint's TLS: the service's, and with mutual TLS
// a client certificate that is this service's own (the other replicas present their
// serving certificate, which the client CA need not sign nor name for client auth: the
// chart's has "server auth" only) or one the client CA signs for client auth.
func forwardServerTLS(own *tls.Config) *tls.Config {
	if own == nil || own.ClientCAs == nil || own.ClientAuth != tls.RequireAndVerifyClientCert {
		return own
	}
	cfg := own.Clone()
	cfg.ClientAuth = tls.RequireAnyClientCert
	cfg.VerifyPeerCertificate = ownOrSigned(own, own.ClientCAs, x509.ExtKeyUsageClientAuth)
	return cfg
}

// Run serves until ctx ends, then shuts down (forwarded events in flight finish).
func (f *forwardServer) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() {
		if f.srv.TLSConfig != nil {
			errc <- f.srv.ServeTLS(f.lis, "", "")
		} else {
			errc <- f.srv.Serve(f.lis)
		}
	}()
	select {
	case err := <-errc:
		return fmt.Errorf("fleet forwarding endpoint: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 35*time.Second)
	defer cancel()
	_ = f.srv.Shutdown(sctx)
	return nil
}

func forwardHandler(d *dispatch.Dispatcher) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var wr wireRequest
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxForwardBody))
		var a dispatch.Answer
		if err := dec.Decode(&wr); err != nil {
			a = dispatch.AnswerOf(dispatch.ClassInvalid, "forwarded event: "+err.Error(), "", dispatch.Response{})
		} else if req, err := fromWire(d, wr); err != nil {
			a = dispatch.AnswerOf(dispatch.ClassInvalid, err.Error(), dispatch.FieldOf(err), dispatch.Response{})
		} else {
			a = d.Dispatch(r.Context(), req)
		}
		out := wireAnswer{Class: a.Class, Response: a.Response, Field: dispatch.FieldOf(a.Err), Forbidden: a.Forbidden()}
		if a.Err != nil {
			out.Error = a.Err.Error()
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(out)
	})
}

// requireToken checks "Authorization: Bearer <token>" in constant time (no token: none).
func requireToken(token []byte, next http.Handler) http.Handler {
	if len(token) == 0 {
		return next
	}
	want := sha256.Sum256(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := sha256.Sum256([]byte(bearer(r.Header.Get("Authorization"))))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func bearer(h string) string {
	const p = "Bearer "
	if len(h) > len(p) && h[:len(p)] == p {
		return h[len(p):]
	}
	return ""
}

// forwardClient hands events to their owner (dispatch.Forwarder), with the service's
// bearer token and, with TLS, its certificate as the client certificate.
type forwardClient struct {
	http   *http.Client
	scheme string
	token  []byte
}

func newForwardClient(tlsCfg *tls.Config, token []byte) *forwardClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32
	c := &forwardClient{http: &http.Client{Transport: tr}, scheme: "http", token: token}
	if tlsCfg != nil {
		tr.TLSClientConfig = peerTLS(tlsCfg)
		c.scheme = "https"
	}
	return c
}

// peerTLS is the forwarding client's TLS: it presents the service's certificate (for
// mutual TLS) and accepts an owner presenting that same certificate (every replica
// mounts one) or one the client CA bundle signs. Owners are reached by pod IP, which
// serving certificates rarely name, so the check is of the certificate, not the name.
//
// The certificate is presented whatever CAs the owner names as acceptable (Go's client
// would send none when the client CA did not sign it): the owner accepts its own.
func peerTLS(own *tls.Config) *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12,
		InsecureSkipVerify:    true, // replaced by VerifyPeerCertificate below
		VerifyPeerCertificate: ownOrSigned(own, own.ClientCAs, x509.ExtKeyUsageServerAuth)}
	if len(own.Certificates) > 0 {
		cert := own.Certificates[0]
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return cfg
}

// ownOrSigned verifies a peer's certificate chain: the leaf is own's certificate, or
// pool (nil: none) signs it for usage.
func ownOrSigned(own *tls.Config, pool *x509.CertPool, usage x509.ExtKeyUsage) func([][]byte, [][]*x509.Certificate) error {
	var mine []byte
	if len(own.Certificates) > 0 && len(own.Certificates[0].Certificate) > 0 {
		mine = own.Certificates[0].Certificate[0]
	}
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("the peer presented no certificate")
		}
		if mine != nil && bytes.Equal(raw[0], mine) {
			return nil
		}
		if pool == nil {
			return errors.New("the peer's certificate is not this service's")
		}
		leaf, err := x509.ParseCertificate(raw[0])
		if err != nil {
			return err
		}
		inter := x509.NewCertPool()
		for _, r := range raw[1:] {
			if c, err := x509.ParseCertificate(r); err == nil {
				inter.AddCert(c)
			}
		}
		_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
		return err
	}
}

// Forward implements dispatch.Forwarder: the owner's answer, or why it gave none (not
// reached, an HTTP status other than 200, an answer out of protocol).
func (c *forwardClient) Forward(ctx context.Context, owner string, req dispatch.Request) (dispatch.Answer, error) {
	wa, err := c.post(ctx, owner, toWire(req))
	if err != nil {
		return dispatch.Answer{}, err
	}
	if wa.Forbidden && wa.Class == dispatch.ClassPermanent {
		return dispatch.ForbiddenAnswerOf(wa.Error, wa.Response), nil
	}
	return dispatch.AnswerOf(wa.Class, wa.Error, wa.Field, wa.Response), nil
}

func (c *forwardClient) post(ctx context.Context, owner string, wr wireRequest) (wireAnswer, error) {
	body, err := json.Marshal(wr)
	if err != nil {
		return wireAnswer{}, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.scheme+"://"+owner+ForwardPath, bytes.NewReader(body))
	if err != nil {
		return wireAnswer{}, err
	}
	hr.Header.Set("Content-Type", "application/json")
	if len(c.token) > 0 {
		hr.Header.Set("Authorization", "Bearer "+string(c.token))
	}
	r, err := c.http.Do(hr)
	if err != nil {
		return wireAnswer{}, err
	}
	defer func() { _ = r.Body.Close() }()
	if r.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(r.Body, 512))
		return wireAnswer{}, fmt.Errorf("HTTP %d: %s", r.StatusCode, bytes.TrimSpace(msg))
	}
	var wa wireAnswer
	if err := json.NewDecoder(io.LimitReader(r.Body, 8<<20)).Decode(&wa); err != nil {
		return wireAnswer{}, fmt.Errorf("reading the owner's answer: %w", err)
	}
	if wa.Class == "" {
		return wireAnswer{}, errors.New("the owner's answer has no class")
	}
	return wa, nil
}
