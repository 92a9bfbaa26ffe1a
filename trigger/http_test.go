package trigger

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/event"
	"github.com/configmap-attacher/configmap-attacher/internal/ops"
)

type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func post(t *testing.T, url, ct string, hdr map[string]string, body string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return do(t, req)
}

func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(b)}
	_ = json.Unmarshal(b, &a.body)
	return a
}

func outcome(t *testing.T, a answer) string {
	t.Helper()
	objs, _ := a.body["objects"].([]any)
	require.Len(t, objs, 1, "answer: %s", a.raw)
	return objs[0].(map[string]any)["outcome"].(string)
}

func newHTTP(t *testing.T, f *fixture, o HTTPOptions) *httptest.Server {
	t.Helper()
	s := NewHTTPServer(f.d, nil, o)
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// legacyOps is the ops routes (internal/ops) as serve mounts them on the receiver for
// one release (HTTPOptions.Ops), with the token's rules.
func legacyOps(t *testing.T, f *fixture, token []byte, public bool) http.Handler {
	t.Helper()
	o := ops.Options{Gatherer: f.d.Metrics().Registry, PublicMetrics: public}
	if b := NewBearer(token); b != nil {
		o.Authorized = b.Valid
	}
	h, err := ops.NewHandler(o)
	require.NoError(t, err)
	return h
}

func TestHTTPAnswers(t *testing.T) {
	f := newFixture(t, dispatch.Config{})
	ts := newHTTP(t, f, HTTPOptions{MaxBodyBytes: 64 << 10, Ops: legacyOps(t, f, nil, false)})
	good := rsPayload("web-1", rsUID)
	data := good
	structured := `{"specversion":"1.0","id":"1","source":"test","type":"resource","datacontenttype":"application/json","data":` + data + `}`
	binary := map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "1", "Ce-Source": "test", "Ce-Type": "resource", "Ce-Cluster": "in-cluster"}

	t.Run("bad requests change nothing", func(t *testing.T) {
		for _, tc := range []struct {
			name, url, ct string
			hdr           map[string]string
			body          string
			status        int
			field         string
		}{
			{"not JSON", "/", "application/json", nil, "hello", 400, "payload"},
			{"not a ReplicaSet", "/", "application/json", nil, `{"body":{"kind":"Pod","metadata":{"name":"a","namespace":"b"}}}`, 400, "body.kind"},
			{"unknown query key", "/?colour=blue", "application/json", nil, good, 400, "colour"},
			{"bad query value", "/?dryRun=perhaps", "application/json", nil, good, 400, "dryRun"},
			{"bad header value", "/", "application/json", map[string]string{"X-Configmap-Attacher-DryRun": "perhaps"}, good, 400, "dryRun"},
			{"query and header disagree", "/?dryRun=true", "application/json", map[string]string{"X-Configmap-Attacher-Dryrun": "false"}, good, 400, "dryRun"},
			{"unknown cluster", "/?cluster=mars", "application/json", nil, good, 400, "cluster"},
			{"binary CloudEvent without id", "/", "application/json", map[string]string{"Ce-Specversion": "1.0", "Ce-Source": "s", "Ce-Type": "t"}, good, 400, "cloudevent"},
			{"structured CloudEvent without data", "/", "application/cloudevents+json", nil, `{"specversion":"1.0","id":"1","source":"s","type":"t"}`, 400, "data"},
			{"refused: UID mismatch", "/", "application/json", nil, rsPayload("web-1", "other"), 409, ""},
			{"refused: ReplicaSet gone", "/", "application/json", nil, rsPayload("web-9", ""), 409, ""},
			{"body over the limit", "/", "application/json", nil, `{"body":"` + strings.Repeat("x", 64<<10) + `"}`, 413, ""},
			{"text/plain", "/", "text/plain", nil, good, 415, ""},
			{"XML", "/", "application/xml", nil, good, 415, ""},
			{"batch CloudEvents", "/", "application/cloudevents-batch+json", nil, "[" + structured + "]", 415, ""},
			{"binary CloudEvent with XML data", "/", "application/xml", binary, "<a/>", 415, ""},
			{"malformed content type", "/", "application/json; ===", nil, good, 415, ""},
			{"gc not served", "/?operation=gc", "application/json", nil, good, 501, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a := post(t, ts.URL+tc.url, tc.ct, tc.hdr, tc.body)
				assert.Equal(t, tc.status, a.status, a.raw)
				assert.Equal(t, "application/json", a.header.Get("Content-Type"))
				assert.NotEmpty(t, a.body["error"], a.raw)
				if tc.field != "" {
					assert.Equal(t, tc.field, a.body["field"], a.raw)
				}
				assert.Empty(t, f.owners(t))
				assert.Zero(t, f.patches())
			})
		}
	})

	t.Run("chunked body over the limit", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/", io.MultiReader(strings.NewReader(`{"body":"`), strings.NewReader(strings.Repeat("x", 128<<10))))
		req.ContentLength = -1
		req.Header.Set("Content-Type", "application/json")
		assert.Equal(t, 413, do(t, req).status)
	})

	t.Run("wrong method and path", func(t *testing.T) {
		a := do(t, mustReq(t, http.MethodGet, ts.URL+"/"))
		assert.Equal(t, 405, a.status)
		assert.Equal(t, "POST", a.header.Get("Allow"))
		assert.Equal(t, 404, post(t, ts.URL+"/nope", "application/json", nil, good).status)
	})

	t.Run("non-ADD is acknowledged", func(t *testing.T) {
		a := post(t, ts.URL+"/", "application/json", nil, strings.Replace(good, `"ADD"`, `"UPDATE"`, 1))
		assert.Equal(t, 200, a.status, a.raw)
		assert.Contains(t, a.body["ignored"], "UPDATE")
		assert.Zero(t, f.patches())
	})

	t.Run("dry run from a query parameter and from a header", func(t *testing.T) {
		a := post(t, ts.URL+"/?dryRun=true", "application/json", nil, good)
		assert.Equal(t, 200, a.status, a.raw)
		assert.Equal(t, string(core.OutcomeWouldAttach), outcome(t, a))
		a = post(t, ts.URL+"/", "application/json", map[string]string{"X-Configmap-Attacher-DryRun": "true"}, good)
		assert.Equal(t, 200, a.status, a.raw)
		assert.Equal(t, string(core.OutcomeWouldAttach), outcome(t, a))
		assert.Zero(t, f.patches())
	})

	t.Run("every accepted form attaches once", func(t *testing.T) {
		for i, tc := range []struct {
			name, ct string
			hdr      map[string]string
			body     string
			want     core.Outcome
		}{
			{"plain JSON (Argo HTTP trigger)", "application/json", nil, good, core.OutcomeAttached},
			{"structured CloudEvent", "application/cloudevents+json; charset=utf-8", nil, structured, core.OutcomeAlreadyAttached},
			{"binary CloudEvent", "application/json", binary, data, core.OutcomeAlreadyAttached},
			{"bare ReplicaSet, no content type", "", nil, `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-1","namespace":"shop"}}`, core.OutcomeAlreadyAttached},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := f.patches()
				a := post(t, ts.URL+"/?operation=attach", tc.ct, tc.hdr, tc.body)
				assert.Equal(t, 200, a.status, a.raw)
				assert.Equal(t, string(tc.want), outcome(t, a))
				assert.Equal(t, "in-cluster", a.body["cluster"])
				if i > 0 {
					assert.Equal(t, before, f.patches(), "a replay writes nothing")
				}
			})
		}
		assert.Len(t, f.owners(t), 1)
	})

	t.Run("health, readiness, metrics on the receiver until 0.5.0", func(t *testing.T) {
		assert.Equal(t, 200, do(t, mustReq(t, http.MethodGet, ts.URL+"/healthz")).status)
		assert.Equal(t, 200, do(t, mustReq(t, http.MethodGet, ts.URL+"/readyz")).status)
		m := do(t, mustReq(t, http.MethodGet, ts.URL+"/metrics"))
		assert.Equal(t, 200, m.status)
		assert.Contains(t, m.raw, `configmap_attacher_events_total{cluster="in-cluster",path="http",result="ok"}`)
		assert.Contains(t, m.raw, `configmap_attacher_events_total{cluster="",path="http",result="invalid"}`)
		assert.Contains(t, m.raw, `configmap_attacher_objects_total{cluster="in-cluster",outcome="attached"} 1`)
	})
}

func mustReq(t *testing.T, method, url string) *http.Request {
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	return req
}

func TestHTTPRetryable(t *testing.T) {
	good := rsPayload("web-1", rsUID)
	t.Run("503 when the cluster is unavailable", func(t *testing.T) {
		f := newFixture(t, dispatch.Config{})
		f.reader.hook = func(context.Context) error { return apierrors.NewServiceUnavailable("down") }
		a := post(t, newHTTP(t, f, HTTPOptions{}).URL+"/", "application/json", nil, good)
		assert.Equal(t, 503, a.status, a.raw)
		assert.Equal(t, "1", a.header.Get("Retry-After"))
	})
	t.Run("503 on the server-side timeout", func(t *testing.T) {
		f := newFixture(t, dispatch.Config{ExecuteTimeout: 50 * time.Millisecond})
		f.reader.hook = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
		a := post(t, newHTTP(t, f, HTTPOptions{}).URL+"/", "application/json", nil, good)
		assert.Equal(t, 503, a.status, a.raw)
		assert.Contains(t, a.raw, "deadline")
	})
	t.Run("429 when too many are in flight", func(t *testing.T) {
		f := newFixture(t, dispatch.Config{MaxInFlight: 1})
		entered, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		f.reader.hook = func(context.Context) error { once.Do(func() { close(entered) }); <-release; return nil }
		ts := newHTTP(t, f, HTTPOptions{})
		first := make(chan int, 1)
		go func() {
			resp, err := http.Post(ts.URL+"/", "application/json", bytes.NewReader([]byte(good)))
			if err == nil {
				resp.Body.Close()
				first <- resp.StatusCode
				return
			}
			first <- 0
		}()
		<-entered
		a := post(t, ts.URL+"/", "application/json", nil, good)
		assert.Equal(t, 429, a.status, a.raw)
		assert.Equal(t, "1", a.header.Get("Retry-After"))
		close(release)
		assert.Equal(t, 200, <-first)
	})
}

func TestHTTPGracefulShutdown(t *testing.T) {
	f := newFixture(t, dispatch.Config{})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.reader.hook = func(context.Context) error { once.Do(func() { close(entered) }); <-release; return nil }
	lis, err := (&net0{}).listen()
	require.NoError(t, err)
	s := NewHTTPServer(f.d, lis, HTTPOptions{ShutdownTimeout: 10 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	url := "http://" + s.Addr().String()
	first := make(chan int, 1)
	go func() {
		resp, err := http.Post(url+"/", "application/json", strings.NewReader(rsPayload("web-1", rsUID)))
		if err != nil {
			first <- 0
			return
		}
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-entered
	cancel()
	time.Sleep(100 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("server stopped with a request in flight: %v", err)
	default:
	}
	close(release)
	assert.Equal(t, 200, <-first, "the in-flight request completes")
	require.NoError(t, <-done)
	assert.Len(t, f.owners(t), 1)
	_ = event.MaxPayloadBytes
}

type net0 struct{}

func (net0) listen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

// A request refused before dispatch is counted by its class, as on every way in: bad
// content types and bodies are invalid input, not server failures.
func TestHTTPRejectionsAreCountedByClass(t *testing.T) {
	f := newFixture(t, dispatch.Config{})
	ts := newHTTP(t, f, HTTPOptions{MaxBodyBytes: 1024})
	for _, tc := range []struct {
		name, ct, body string
		status         int
	}{
		{"text/plain", "text/plain", "{}", 415},
		{"a batch", "application/cloudevents-batch+json", "[]", 415},
		{"a bad content type", "a/b; c", "{}", 415},
		{"a body over the limit", "application/json", strings.Repeat("x", 2048), 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.status, post(t, ts.URL+"/", tc.ct, nil, tc.body).status)
		})
	}
	mfs, err := f.d.Metrics().Registry.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "configmap_attacher_events_total" {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "result" {
						got[l.GetValue()] += m.GetCounter().GetValue()
					}
				}
			}
		}
	}
	assert.Equal(t, map[string]float64{"invalid": 4}, got)
}
