package trigger

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/event"
)

// SpecHeaderPrefix prefixes the HTTP headers that carry trigger spec keys, e.g.
// X-Configmap-Attacher-ConfigMaps: a,b (header names are case-insensitive).
const SpecHeaderPrefix = "X-Configmap-Attacher-"

// HTTPOptions configure an HTTPServer.
type HTTPOptions struct {
	// TLS, when set, serves HTTPS.
	TLS *tls.Config
	// MaxBodyBytes bounds a request body (413 beyond); zero means
	// event.MaxPayloadBytes.
	MaxBodyBytes int64
	// ShutdownTimeout bounds the graceful shutdown; zero means 30s.
	ShutdownTimeout time.Duration
	// AuthToken, when set, is the bearer token every event must carry
	// (Authorization: Bearer <token>, compared in constant time); others get 401.
	AuthToken []byte
	// Ops, when set, serves the service's /healthz, /readyz and /metrics on the receiver
	// too, with the ops listener's own token rules (internal/ops). Deprecated: kept for
	// one release so that probes and scrapes of the receiver's port keep working while
	// they move to the ops listener (serve --metrics-addr); removed in 0.5.0.
	Ops http.Handler
}

// LegacyOpsPaths are the routes HTTPOptions.Ops serves on the receiver.
var LegacyOpsPaths = []string{"/healthz", "/readyz", "/metrics"}

// HTTPServer is the HTTP receiver:
//
//	POST /        an event: CloudEvent (binary or structured mode) or plain JSON (Argo
//	              Events' HTTP trigger); the trigger spec comes from query parameters
//	              (?configMaps=a,b&dryRun=true) or X-Configmap-Attacher-<Key> headers.
//	              200 with the JSON Response; 400 bad input (JSON {"error","field"});
//	              401 no valid bearer token; 403 RBAC forbade a write; 409 refused by
//	              a safety rule; 413 body too large; 415 content type not JSON /
//	              CloudEvents; 422 a write refused for good (admission, invalid
//	              object); 429 too many events in flight; 503 cluster unavailable,
//	              timeout or shutting down (both with Retry-After); 500 otherwise.
//
// The service's /healthz, /readyz and /metrics are the ops listener's (internal/ops);
// HTTPOptions.Ops serves them here too for one release.
type HTTPServer struct {
	d        Dispatcher
	ops      http.Handler
	lis      net.Listener
	srv      *http.Server
	maxBody  int64
	shutdown time.Duration
	stopping atomic.Bool
	auth     *Bearer
}

// NewHTTPServer returns an HTTP receiver for d on lis. Run serves it.
func NewHTTPServer(d Dispatcher, lis net.Listener, o HTTPOptions) *HTTPServer {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = event.MaxPayloadBytes
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.TLS != nil {
		lis = tls.NewListener(lis, o.TLS)
	}
	s := &HTTPServer{d: d, ops: o.Ops, lis: lis, maxBody: o.MaxBodyBytes, shutdown: o.ShutdownTimeout,
		auth: NewBearer(o.AuthToken)}
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	return s
}

// Addr returns the listener's address.
func (s *HTTPServer) Addr() net.Addr { return s.lis.Addr() }

// Handler returns the receiver's routes (also usable with httptest).
func (s *HTTPServer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", s.auth.wrap(http.HandlerFunc(s.serveEvent), s.d))
	if s.ops != nil {
		for _, p := range LegacyOpsPaths {
			mux.Handle(p, s.ops)
		}
	}
	return mux
}

// Run serves until ctx ends, then shuts down gracefully: new events are answered
// shutting down, new connections are refused and requests in flight finish (bounded by
// the shutdown timeout). It returns nil after a clean stop.
func (s *HTTPServer) Run(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.lis) }()
	select {
	case err := <-errc:
		return fmt.Errorf("HTTP server on %s: %w", s.lis.Addr(), err)
	case <-ctx.Done():
	}
	s.stopping.Store(true)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.shutdown)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("HTTP server on %s: %w", s.lis.Addr(), serr)
	}
	if err != nil {
		return fmt.Errorf("HTTP server shutdown: %w", err)
	}
	return nil
}

type errorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

func (s *HTTPServer) serveEvent(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "not found; POST events to /"})
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{Error: "POST an event to /"})
		return
	}
	status, body := s.event(r)
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, body)
}

// reject answers a request refused before dispatch with the dispatcher's Answer;
// status, when not 0, refines the answer's own (413, 415 for invalid input).
func (s *HTTPServer) reject(r *http.Request, status int, err error) (int, any) {
	a := s.d.Reject(r.Context(), dispatch.PathHTTP, core.Event{}, err)
	st, body := httpAnswer(a)
	if status != 0 {
		st = status
	}
	return st, body
}

// httpAnswer is a's status (HTTPStatus) and JSON body: the Response when the event was
// done, ignored or failed on some object, else the error and the invalid field.
func httpAnswer(a dispatch.Answer) (int, any) {
	if answered(a) {
		return HTTPStatus(a), a.Response
	}
	return HTTPStatus(a), errorBody{Error: a.Err.Error(), Field: a.Field()}
}

// event handles POST / and returns the status and JSON body.
func (s *HTTPServer) event(r *http.Request) (int, any) {
	if s.stopping.Load() {
		return s.reject(r, http.StatusServiceUnavailable, fmt.Errorf("%w; retry", dispatch.ErrShuttingDown))
	}
	binary := r.Header.Get("Ce-Specversion") != ""
	ct := r.Header.Get("Content-Type")
	mt := ""
	if ct != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(ct); err != nil {
			return s.reject(r, http.StatusUnsupportedMediaType, core.Invalidf("content-type", "%q: %v", core.Clip(ct), err))
		}
	}
	switch {
	case mt == "application/cloudevents-batch+json":
		return s.reject(r, http.StatusUnsupportedMediaType, core.Invalidf("content-type", "CloudEvents batch mode is not supported; send one event per request"))
	case mt == "application/cloudevents+json" && !binary:
	case mt == "" || event.IsJSONContentType(mt):
	default:
		return s.reject(r, http.StatusUnsupportedMediaType, core.Invalidf("content-type", "%q is not supported: send application/json, application/cloudevents+json, or a binary-mode CloudEvent with JSON data", core.Clip(mt)))
	}
	if r.ContentLength > s.maxBody {
		return s.reject(r, http.StatusRequestEntityTooLarge, core.Invalidf("body", "is %d bytes, at most %d are accepted", r.ContentLength, s.maxBody))
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, s.maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return s.reject(r, http.StatusRequestEntityTooLarge, core.Invalidf("body", "exceeds %d bytes", s.maxBody))
		}
		return s.reject(r, http.StatusBadRequest, core.Invalidf("body", "reading it: %v", err))
	}
	opts, err := specFromRequest(r, s.d.ParseSpec)
	if err != nil {
		return s.reject(r, 0, err)
	}
	var dec event.Decoded
	if binary {
		dec, err = decodeBinary(r.Context(), r.Header, body)
	} else {
		dec, err = event.Decode(body)
	}
	var a dispatch.Answer
	if err != nil {
		a = s.d.Reject(r.Context(), dispatch.PathHTTP, dec.Event, err)
	} else {
		a = s.d.Dispatch(r.Context(), dispatch.Request{Path: dispatch.PathHTTP, Options: opts, Event: dec.CoreEvent()})
	}
	return httpAnswer(a)
}

// decodeBinary reads a binary-mode CloudEvent (ce-* headers, data in the body) with the
// CloudEvents SDK and decodes it.
func decodeBinary(ctx context.Context, h http.Header, body []byte) (event.Decoded, error) {
	msg := cehttp.NewMessage(h, io.NopCloser(bytes.NewReader(body)))
	defer func() { _ = msg.Finish(nil) }()
	ev, err := binding.ToEvent(ctx, msg)
	if err != nil {
		return event.Decoded{}, core.Invalidf("cloudevent", "not a valid binary-mode CloudEvent: %s", core.Clip(core.OneLine(err.Error())))
	}
	return event.DecodeEvent(*ev)
}

// specKeys maps lower-cased spec keys to their spelling.
var specKeys = func() map[string]string {
	m := map[string]string{}
	for k := range core.DefaultOptions().Spec() {
		m[strings.ToLower(k)] = k
	}
	return m
}()

// specFromRequest builds the trigger spec from query parameters and
// X-Configmap-Attacher-<Key> headers. A key given twice with different values, or an
// unknown key, is a *core.FieldError naming it.
func specFromRequest(r *http.Request, parse SpecParser) (core.Options, error) {
	spec := map[string]string{}
	set := func(k, v string) error {
		if canon, ok := specKeys[strings.ToLower(k)]; ok {
			k = canon
		}
		if old, ok := spec[k]; ok && old != v {
			return core.Invalidf(core.Clip(k), "given more than once with different values")
		}
		spec[k] = v
		return nil
	}
	for k, vs := range r.URL.Query() {
		for _, v := range vs {
			if err := set(k, v); err != nil {
				return core.Options{}, err
			}
		}
	}
	for k, vs := range r.Header {
		if len(k) <= len(SpecHeaderPrefix) || !strings.EqualFold(k[:len(SpecHeaderPrefix)], SpecHeaderPrefix) {
			continue
		}
		for _, v := range vs {
			if err := set(k[len(SpecHeaderPrefix):], v); err != nil {
				return core.Options{}, err
			}
		}
	}
	return parse(spec)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
