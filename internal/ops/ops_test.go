package ops

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const token = "tok-5e4d3c2b1a"

// authorized is the bearer check as the server wires it (trigger.Bearer.Valid).
func authorized(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+token }

func registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "configmap_attacher_test_total", Help: "test"})
	c.Inc()
	reg.MustRegister(c)
	return reg
}

func get(t *testing.T, h http.Handler, path, auth string) (int, http.Header, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, path, nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Header(), rec.Body.String()
}

// The token rules of the ops routes: probes never need the token; /metrics needs it
// when one is configured unless public; pprof is off unless enabled and then always
// needs it; the answer never echoes a token.
func TestOpsTokenRules(t *testing.T) {
	for _, tc := range []struct {
		name        string
		token       bool
		public      bool
		pprof       bool
		path        string
		none, wrong int
		right       int
	}{
		{name: "healthz without a token configured", path: "/healthz", none: 200, wrong: 200, right: 200},
		{name: "healthz with a token configured", token: true, path: "/healthz", none: 200, wrong: 200, right: 200},
		{name: "readyz with a token configured", token: true, path: "/readyz", none: 200, wrong: 200, right: 200},
		{name: "metrics without a token configured", path: "/metrics", none: 200, wrong: 200, right: 200},
		{name: "metrics with a token configured", token: true, path: "/metrics", none: 401, wrong: 401, right: 200},
		{name: "metrics public", token: true, public: true, path: "/metrics", none: 200, wrong: 200, right: 200},
		{name: "pprof off by default", token: true, path: "/debug/pprof/", none: 404, wrong: 404, right: 404},
		{name: "pprof enabled needs the token", token: true, pprof: true, path: "/debug/pprof/", none: 401, wrong: 401, right: 200},
		{name: "pprof needs the token even with public metrics", token: true, public: true, pprof: true, path: "/debug/pprof/heap?debug=1", none: 401, wrong: 401, right: 200},
		{name: "an unknown path", token: true, path: "/", none: 404, wrong: 404, right: 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Gatherer: registry(), PublicMetrics: tc.public, Pprof: tc.pprof}
			if tc.token {
				o.Authorized = authorized
			}
			h, err := NewHandler(o)
			require.NoError(t, err)
			for auth, st := range map[string]int{"": tc.none, "Bearer nope-" + token[:4]: tc.wrong, "Bearer " + token: tc.right} {
				code, hdr, body := get(t, h, tc.path, auth)
				assert.Equal(t, st, code, "auth %q: %s", auth, body)
				if code == http.StatusUnauthorized {
					assert.Contains(t, hdr.Get("WWW-Authenticate"), `Bearer realm="configmap-attacher"`)
				}
				assert.NotContains(t, body, token, "the answer never echoes the token")
			}
		})
	}
}

func TestOpsMetricsServeTheGatherer(t *testing.T) {
	h, err := NewHandler(Options{Gatherer: registry()})
	require.NoError(t, err)
	code, _, body := get(t, h, "/metrics", "")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "configmap_attacher_test_total 1")
}

func TestOpsRefusesPprofWithoutAToken(t *testing.T) {
	_, err := NewHandler(Options{Gatherer: registry(), Pprof: true})
	require.ErrorContains(t, err, "pprof needs the bearer token")
	_, err = NewHandler(Options{})
	require.ErrorContains(t, err, "Gatherer is required")
}

// /readyz without credentials says only ready or not: the detail (member clusters,
// their server URLs, probe errors) is shown only with the bearer token.
func TestReadyzDetailOnlyWithTheToken(t *testing.T) {
	const detail = "member-b DOWN: Get \"https://10.0.0.7:6443/readyz\": dial tcp: connection refused\n"
	for _, tt := range []struct {
		name       string
		configured bool
		sent       string
		ready      bool
		code       int
		want       string
	}{
		{name: "no token configured", ready: true, code: 200, want: "ok\n"},
		{name: "no token configured, not ready", ready: false, code: 503, want: "not ready\n"},
		{name: "no token sent", configured: true, ready: true, code: 200, want: "ok\n"},
		{name: "a wrong token", configured: true, sent: "Bearer guess", ready: false, code: 503, want: "not ready\n"},
		{name: "the token", configured: true, sent: "Bearer " + token, ready: false, code: 503, want: "not ready\n" + detail},
		{name: "the token, ready", configured: true, sent: "Bearer " + token, ready: true, code: 200, want: "ok\n" + detail},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{Gatherer: registry(), Ready: func() (bool, string) { return tt.ready, detail }}
			if tt.configured {
				o.Authorized = authorized
			}
			h, err := NewHandler(o)
			require.NoError(t, err)
			code, _, body := get(t, h, "/readyz", tt.sent)
			assert.Equal(t, tt.code, code)
			assert.Equal(t, tt.want, body)
		})
	}
}

// What start-up still waits for (Options.Summary, which names no cluster) is shown to
// anyone, between the status and the token-only detail.
func TestReadyzSummaryToAnyoneDetailOnlyWithTheToken(t *testing.T) {
	const (
		summary = "starting: 2 of 5 clusters known at start not in sync yet (start-up deadline in 12s)"
		detail  = "member-b DOWN: Get \"https://10.0.0.7:6443/readyz\": dial tcp: connection refused\n"
	)
	for _, tt := range []struct {
		name    string
		sent    string
		summary string
		want    string
	}{
		{name: "no token, starting", summary: summary, want: "not ready\n" + summary + "\n"},
		{name: "the token, starting", sent: "Bearer " + token, summary: summary, want: "not ready\n" + summary + "\n" + detail},
		{name: "no token, nothing awaited", want: "not ready\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, err := NewHandler(Options{Gatherer: registry(), Authorized: authorized,
				Ready: func() (bool, string) { return false, detail }, Summary: func() string { return tt.summary }})
			require.NoError(t, err)
			code, _, body := get(t, h, "/readyz", tt.sent)
			assert.Equal(t, 503, code)
			assert.Equal(t, tt.want, body)
		})
	}
}

// Once the service stops, /readyz answers 503 while the listener lingers for the rest
// of the service to drain (the liveness probe and the scrape still answer), and Run
// returns once the linger ends.
func TestOpsListenerAnswersShuttingDownUntilTheServiceDrained(t *testing.T) {
	linger := make(chan struct{})
	h, err := NewHandler(Options{Gatherer: registry(), Linger: linger})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := NewServer(h, lis)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	url := "http://" + s.Addr().String()
	code, body := fetch(t, url+"/readyz")
	assert.Equal(t, 200, code, body)

	cancel()
	for code == 200 { // Run marks the handler stopping once it sees ctx end
		code, body = fetch(t, url+"/readyz")
	}
	assert.Equal(t, 503, code)
	assert.Equal(t, "shutting down\n", body)
	code, _ = fetch(t, url+"/healthz")
	assert.Equal(t, 200, code, "the liveness probe passes while the service drains")
	code, body = fetch(t, url+"/metrics")
	assert.Equal(t, 200, code)
	assert.Contains(t, body, "configmap_attacher_test_total")

	close(linger)
	require.NoError(t, <-done)
	_, err = http.Get(url + "/healthz")
	assert.Error(t, err, "the listener is closed")
}

func TestOpsTurnedOffOnlyMarksStopping(t *testing.T) {
	h, err := NewHandler(Options{Gatherer: registry()})
	require.NoError(t, err)
	s := NewServer(h, nil)
	assert.Nil(t, s.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, s.Run(ctx))
	code, _, body := get(t, h, "/readyz", "")
	assert.Equal(t, 503, code)
	assert.True(t, strings.HasPrefix(body, "shutting down"))
}

func fetch(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
