// Package ops is the service's operations listener (serve --metrics-addr): /metrics,
// /healthz, /readyz and, when enabled, the Go runtime's profiles under /debug/pprof/.
// It is a part of its own, apart from every way in, so that the probes and the scrape
// stay when a receiver is turned off, and the receivers' bearer token needs no
// exemptions (docs/design.md, "The ops listener").
package ops

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultAddr is the ops listener's default address. The receiver already holds :8080
// (controller-runtime's metrics port); :8081 is controller-runtime's probe port, and
// this listener serves the probes and the metrics together.
const DefaultAddr = ":8081"

// LegacyPaths are the routes the HTTP receiver still serves for one release, through
// Handler.Legacy (deprecated in 0.3.x, CHANGELOG.md).
var LegacyPaths = []string{"/healthz", "/readyz", "/metrics"}

// Options configure the ops routes and listener.
type Options struct {
	// Gatherer is what /metrics serves. Required.
	Gatherer prometheus.Gatherer
	// Ready reports readiness for /readyz with detail lines (one per cluster and
	// component); nil means always ready.
	Ready func() (bool, string)
	// Summary, when set, returns a line anyone may read, after the status and before
	// the detail: what start-up still waits for, with no cluster name or URL in it
	// ("" for none).
	Summary func() string
	// Authorized reports whether a request carries the service's bearer token; nil
	// means no token is configured.
	Authorized func(*http.Request) bool
	// PublicMetrics serves /metrics without the token (with a token configured).
	PublicMetrics bool
	// Pprof serves /debug/pprof/; it then always needs the token (New refuses Pprof
	// without Authorized): a profile shows the heap and costs CPU.
	Pprof bool
	// TLS, when set, serves HTTPS. It never requires a client certificate: the kubelet's
	// probes carry none; Authorized guards what needs guarding (the token, or with mutual
	// TLS a verified client certificate, asked for but optional).
	TLS *tls.Config
	// ShutdownTimeout bounds the graceful shutdown; zero means 5s.
	ShutdownTimeout time.Duration
	// Linger, when set, keeps the listener serving after Run's context ends until it is
	// closed (the rest of the service has drained): /readyz answers 503 and /metrics
	// shows the drain meanwhile, and the liveness probe keeps passing.
	Linger <-chan struct{}
}

// Handler serves the ops routes:
//
//	GET /healthz        200 while the process serves; no token.
//	GET /readyz         200 once ready, 503 before and while shutting down; no token,
//	                    the summary line (what start-up waits for) to anyone, the
//	                    detail lines only with the token.
//	GET /metrics        Prometheus metrics; the token when one is configured, unless
//	                    PublicMetrics.
//	/debug/pprof/...    with Pprof only, and only with the token.
type Handler struct {
	o        Options
	stopping atomic.Bool
	mux      *http.ServeMux
}

// NewHandler validates o and returns the ops routes.
func NewHandler(o Options) (*Handler, error) {
	if o.Gatherer == nil {
		return nil, errors.New("ops: Options.Gatherer is required")
	}
	if o.Pprof && o.Authorized == nil {
		return nil, errors.New("ops: pprof needs the bearer token (--http-token-file); without one use --profiling-addr, a loopback listener")
	}
	if o.Ready == nil {
		o.Ready = func() (bool, string) { return true, "" }
	}
	h := &Handler{o: o, mux: http.NewServeMux()}
	h.mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { plain(w, http.StatusOK, "ok") })
	h.mux.HandleFunc("/readyz", h.readyz)
	h.mux.Handle("/metrics", h.guard(promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{}), o.PublicMetrics))
	if o.Pprof {
		h.mux.Handle("/debug/pprof/", h.guard(http.HandlerFunc(pprof.Index), false))
		h.mux.Handle("/debug/pprof/cmdline", h.guard(http.HandlerFunc(pprof.Cmdline), false))
		h.mux.Handle("/debug/pprof/profile", h.guard(http.HandlerFunc(pprof.Profile), false))
		h.mux.Handle("/debug/pprof/symbol", h.guard(http.HandlerFunc(pprof.Symbol), false))
		h.mux.Handle("/debug/pprof/trace", h.guard(http.HandlerFunc(pprof.Trace), false))
	}
	return h, nil
}

// ServeHTTP serves the ops routes; anything else is 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Stop makes /readyz answer 503 "shutting down" from now on.
func (h *Handler) Stop() { h.stopping.Store(true) }

func (h *Handler) readyz(w http.ResponseWriter, r *http.Request) {
	if h.stopping.Load() {
		plain(w, http.StatusServiceUnavailable, "shutting down")
		return
	}
	ok, detail := h.o.Ready()
	if !h.authorized(r) {
		detail = "" // cluster names, member URLs and probe errors only behind the token
	}
	msg := "ok"
	if !ok {
		msg = "not ready"
	}
	if h.o.Summary != nil {
		msg = withDetail(msg, h.o.Summary())
	}
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	plain(w, status, withDetail(msg, detail))
}

func (h *Handler) authorized(r *http.Request) bool { return h.o.Authorized != nil && h.o.Authorized(r) }

// guard serves next to a request with the token, or to anyone when no token is
// configured or public is set; others get 401 with a WWW-Authenticate challenge.
func (h *Handler) guard(next http.Handler, public bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.o.Authorized == nil || public || h.o.Authorized(r) {
			next.ServeHTTP(w, r)
			return
		}
		challenge := `Bearer realm="configmap-attacher"`
		msg := "a bearer token is required (Authorization: Bearer <token>)"
		if r.Header.Get("Authorization") != "" {
			challenge += `, error="invalid_token"`
			msg = "the bearer token is not valid"
		}
		w.Header().Set("WWW-Authenticate", challenge)
		plain(w, http.StatusUnauthorized, msg)
	})
}

// withDetail appends detail lines (Options.Ready) to a /readyz message.
func withDetail(msg, detail string) string {
	if detail = strings.TrimRight(detail, "\n"); detail != "" {
		return msg + "\n" + detail
	}
	return msg
}

func plain(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

// Server is the ops listener: Handler on a listener of its own.
type Server struct {
	h        *Handler
	lis      net.Listener
	srv      *http.Server
	shutdown time.Duration
}

// NewServer returns the ops listener serving h on lis; a nil lis (the listener turned
// off) makes Run only mark h stopping when its context ends.
func NewServer(h *Handler, lis net.Listener) *Server {
	s := &Server{h: h, lis: lis, shutdown: h.o.ShutdownTimeout}
	if s.shutdown <= 0 {
		s.shutdown = 5 * time.Second
	}
	if lis != nil && h.o.TLS != nil {
		s.lis = tls.NewListener(lis, h.o.TLS)
	}
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute,
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	return s
}

// Addr returns the listener's address, or nil when turned off.
func (s *Server) Addr() net.Addr {
	if s.lis == nil {
		return nil
	}
	return s.lis.Addr()
}

// Run serves until ctx ends, then /readyz turns 503 and, after Options.Linger, the
// listener shuts down gracefully (scrapes in flight finish, bounded by the shutdown timeout). It returns
// nil after a clean stop.
func (s *Server) Run(ctx context.Context) error {
	if s.lis == nil {
		<-ctx.Done()
		s.h.Stop()
		return nil
	}
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.lis) }()
	select {
	case err := <-errc:
		return fmt.Errorf("ops listener on %s: %w", s.lis.Addr(), err)
	case <-ctx.Done():
	}
	s.h.Stop()
	if s.h.o.Linger != nil {
		select {
		case <-s.h.o.Linger:
		case err := <-errc:
			return fmt.Errorf("ops listener on %s: %w", s.lis.Addr(), err)
		}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.shutdown)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("ops listener on %s: %w", s.lis.Addr(), serr)
	}
	if err != nil {
		return fmt.Errorf("ops listener shutdown: %w", err)
	}
	return nil
}
