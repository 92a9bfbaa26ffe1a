package trigger_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
	"github.com/configmap-attacher/configmap-attacher/trigger"
)

// touchReader fails every read and counts it: a bad input must be rejected before the
// cluster is read at all.
type touchReader struct{ n atomic.Int64 }

var errTouched = errors.New("the cluster was read")

func (r *touchReader) ReplicaSet(context.Context, string, string) (*appsv1.ReplicaSet, error) {
	r.n.Add(1)
	return nil, errTouched
}
func (r *touchReader) Deployment(context.Context, string, string) (*appsv1.Deployment, error) {
	r.n.Add(1)
	return nil, errTouched
}
func (r *touchReader) Rollout(context.Context, string, string) (*unstructured.Unstructured, error) {
	r.n.Add(1)
	return nil, errTouched
}
func (r *touchReader) ObjectMeta(context.Context, core.Kind, string, string) (*metav1.PartialObjectMetadata, error) {
	r.n.Add(1)
	return nil, errTouched
}
func (r *touchReader) Users(context.Context, core.Kind, string, string) (*core.Users, error) {
	r.n.Add(1)
	return nil, errTouched
}

type breakFixture struct {
	d      *dispatch.Dispatcher
	reader *touchReader
	kc     *fake.Clientset
	ts     *httptest.Server
}

func newBreakFixture(t *testing.T, maxBody int64) *breakFixture {
	t.Helper()
	kc := fake.NewClientset()
	r := &touchReader{}
	log := testfix.Quiet()
	a, err := core.NewAttacher(core.Config{Cluster: "in-cluster", Client: kc, Reader: r, Logger: log})
	require.NoError(t, err)
	clusters, err := dispatch.NewSingleCluster("", a)
	require.NoError(t, err)
	svc, err := dispatch.New(dispatch.Config{Clusters: clusters, Logger: log})
	require.NoError(t, err)
	ts := httptest.NewServer(trigger.NewHTTPServer(svc, nil, trigger.HTTPOptions{MaxBodyBytes: maxBody}).Handler())
	t.Cleanup(ts.Close)
	return &breakFixture{d: svc, reader: r, kc: kc, ts: ts}
}

func rs(name string) string {
	return `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"` + name + `","namespace":"shop","uid":"u1"}}`
}

func ce(extra string) string {
	return `{"specversion":"1.0","id":"1","source":"s","type":"t"` + extra + `}`
}

func nest(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// Rule 8 on the HTTP receiver: hostile payloads get 400/413/415 with a JSON error, and
// neither the cluster is read nor anything written.
func TestHTTPRefusesHostilePayloads(t *testing.T) {
	f := newBreakFixture(t, 256<<10)
	binary := map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "1", "Ce-Source": "s", "Ce-Type": "t"}
	for _, tc := range []struct {
		name, ct string
		hdr      map[string]string
		body     string
		status   int
	}{
		{"data_base64 garbage", "application/cloudevents+json", nil, ce(`,"data_base64":"!!!not base64***"`), 400},
		{"data_base64 of binary junk", "application/cloudevents+json", nil, ce(`,"data_base64":"` + base64.StdEncoding.EncodeToString([]byte{0xff, 0xfe, 0, 1, 2}) + `"`), 400},
		{"data_base64 of a deep nest", "application/cloudevents+json", nil, ce(`,"data_base64":"` + base64.StdEncoding.EncodeToString([]byte(nest(5000))) + `"`), 400},
		{"data_base64 of a non-ReplicaSet", "application/cloudevents+json", nil, ce(`,"data_base64":"` + base64.StdEncoding.EncodeToString([]byte(`{"kind":"Pod","metadata":{"name":"a","namespace":"b"}}`)) + `"`), 400},
		{"data_base64 not a string", "application/cloudevents+json", nil, ce(`,"data_base64":{"a":1}`), 400},
		{"data and data_base64", "application/cloudevents+json", nil, ce(`,"data":` + rs("web-1") + `,"data_base64":"e30="`), 400},
		{"specversion a number", "application/cloudevents+json", nil, `{"specversion":1,"id":"1","source":"s","type":"t","data":` + rs("web-1") + `}`, 400},
		{"specversion 0.1", "application/cloudevents+json", nil, `{"specversion":"0.1","id":"1","source":"s","type":"t","data":` + rs("web-1") + `}`, 400},
		{"extension deep nest", "application/cloudevents+json", nil, ce(`,"ext":` + nest(20000) + `,"data":` + rs("web-1")), 400},
		{"extension cluster not a string", "application/cloudevents+json", nil, ce(`,"cluster":{"a":1},"data":` + rs("web-1")), 400},
		{"extension cluster with newline", "application/cloudevents+json", nil, ce(`,"cluster":"a\nb","data":` + rs("web-1")), 400},
		{"datacontenttype xml", "application/cloudevents+json", nil, ce(`,"datacontenttype":"application/xml","data":"<a/>"`), 400},
		{"uppercase name", "application/json", nil, rs("Web-1"), 400},
		{"unicode name", "application/json", nil, rs("wëb-1"), 400},
		{"NUL in name", "application/json", nil, rs(`web\u0000-1`), 400},
		{"namespace traversal", "application/json", nil, `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"x","namespace":"../kube-system"}}`, 400},
		{"name traversal", "application/json", nil, `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"../../x","namespace":"shop"}}`, 400},
		{"name a number", "application/json", nil, `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":7,"namespace":"shop"}}`, 400},
		{"body string of deep nest", "application/json", nil, `{"body":"` + nest(3000) + `"}`, 400},
		{"body string of string", "application/json", nil, `{"body":"\"{}\""}`, 400},
		{"invalid UTF-8", "application/json", nil, "{\"body\":{\"kind\":\"ReplicaSet\",\"metadata\":{\"name\":\"a\xff\",\"namespace\":\"shop\"}}}", 400},
		{"UTF-16 BOM", "application/json", nil, "\xfe\xff{}", 400},
		{"top-level array", "application/json", nil, `[` + rs("web-1") + `]`, 400},
		{"top-level null", "application/json", nil, `null`, 400},
		{"empty body", "application/json", nil, ``, 400},
		{"trailing garbage", "application/json", nil, rs("web-1") + `}{`, 400},
		{"event data type DELETE with bad body", "application/json", nil, `{"type":"DELETE","body":7}`, 200},
		{"binary: structured content type with bad specversion", "application/cloudevents+json", binary, `{"specversion":7}`, 400},
		{"binary: structured content type with deep extension", "application/cloudevents+json", binary, ce(`,"ext":` + nest(20000) + `,"data":` + rs("web-1")), 400},
		{"binary: data not JSON", "application/json", binary, `hello`, 400},
		{"binary: empty data", "application/json", binary, ``, 400},
		{"binary: cluster header too long", "application/json", map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "1", "Ce-Source": "s", "Ce-Type": "t", "Ce-Cluster": strings.Repeat("c", 300)}, rs("web-1"), 400},
		{"binary: specversion 9.9", "application/json", map[string]string{"Ce-Specversion": "9.9", "Ce-Id": "1", "Ce-Source": "s", "Ce-Type": "t"}, rs("web-1"), 400},
		{"spec header selector garbage", "application/json", map[string]string{"X-Configmap-Attacher-Selector": "a in (("}, rs("web-1"), 400},
		{"spec header configMaps 10000 names", "application/json", map[string]string{"X-Configmap-Attacher-Configmaps": strings.Repeat("a,", 10000)}, rs("web-1"), 400},
		{"spec header configMaps cross namespace", "application/json", map[string]string{"X-Configmap-Attacher-Configmaps": "kube-system/coredns"}, rs("web-1"), 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := f.reader.n.Load()
			req, err := http.NewRequest(http.MethodPost, f.ts.URL+"/", strings.NewReader(tc.body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", tc.ct)
			for k, v := range tc.hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err, "the server must answer (no panic, no dropped connection)")
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, tc.status, resp.StatusCode, "%s", b)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			if tc.status != 200 {
				assert.Contains(t, string(b), `"error"`)
			}
			assert.Equal(t, before, f.reader.n.Load(), "bad input read the cluster")
			assert.Empty(t, f.kc.Actions(), "bad input reached the cluster")
		})
	}
}

// A chunked (no Content-Length) body far over the limit is cut off with 413, quickly,
// without reading all of it.
func TestHTTPRefusesAChunkedBodyOverTheLimit(t *testing.T) {
	f := newBreakFixture(t, 64<<10)
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte(`{"body":"`))
		chunk := []byte(strings.Repeat("x", 64<<10))
		for i := 0; i < 16*1024; i++ { // up to 1 GiB, stops when the server hangs up
			if _, err := pw.Write(chunk); err != nil {
				return
			}
		}
		_ = pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPost, f.ts.URL+"/", pr)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = -1
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	_ = pr.CloseWithError(io.ErrClosedPipe)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Less(t, time.Since(start), 10*time.Second)
	assert.Empty(t, f.kc.Actions())
}

// A lying Content-Length (smaller than the body) cannot smuggle more than the limit.
func TestHTTPTakesABodyAtTheLimit(t *testing.T) {
	f := newBreakFixture(t, 1024)
	body := `{"body":"` + strings.Repeat("x", 1024) + `"}`
	req, _ := http.NewRequest(http.MethodPost, f.ts.URL+"/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Empty(t, f.kc.Actions())
}

// YAML bombs and other hostile trigger specs (gRPC FetchResource/Execute parse them with
// trigger.ParseSpec): a clear InvalidArgument (*core.FieldError), fast, bounded memory.
func TestSpecRefusesYAMLBombs(t *testing.T) {
	laughs := func(levels, width int) string {
		var b strings.Builder
		b.WriteString("a0: &a0 [\"lol\"]\n")
		for i := 1; i < levels; i++ {
			fmt.Fprintf(&b, "a%d: &a%d [", i, i)
			for j := 0; j < width; j++ {
				if j > 0 {
					b.WriteString(",")
				}
				fmt.Fprintf(&b, "*a%d", i-1)
			}
			b.WriteString("]\n")
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, doc string
		field     string
	}{
		{"billion laughs", laughs(9, 9), ""},
		{"wide laughs", laughs(4, 200), ""},
		{"deep flow nest", "a: " + nest(20000), ""},
		{"deep block nest", strings.Repeat("- ", 5000) + "x", "spec"},
		{"alias to a map as a value", "x: &x {a: b}\nselector: *x", ""}, // field is x or selector: map order
		{"alias to a map on a known key", "selector: &x {a: b}", "selector"},
		{"merge key bomb", "base: &b {operation: gc}\n<<: *b\n<<: *b", ""},
		{"non-string key", "? [a, b]\n: c", ""},
		{"64 KiB + 1", "configMaps: " + strings.Repeat("a", 64<<10), "spec"},
		{"NUL", "dryRun: \"tr\x00ue\"", "spec"},
		{"tab indentation", "a:\n\tb: c", "spec"},
		{"anchor on unknown key", "evil: &e true\ndryRun: *e", "evil"},
		{"number overflow", "dryRun: 1e999999", "dryRun"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, err := trigger.ParseSpec([]byte(tc.doc), core.ParseSpec)
			assert.Less(t, time.Since(start), 2*time.Second, "parse time")
			require.Error(t, err, "must be refused")
			assert.ErrorIs(t, err, core.ErrInvalid)
			if tc.field != "" {
				assert.Equal(t, tc.field, dispatch.FieldOf(err), "%v", err)
			} else {
				assert.NotEmpty(t, dispatch.FieldOf(err), "%v", err)
			}
		})
	}
}

// Ambiguous specs are silently resolved instead of refused: a duplicated key keeps its
// LAST value (so "dryRun: true" followed by "dryRun: false" is a real run), and a YAML
// stream keeps only its first document (a bad value in the second is never reported).
// The HTTP receiver refuses the same ambiguity ("given more than once with different
// values"); docs/design.md: bad values are an InvalidArgument error naming the key.
func TestSpecRefusesAmbiguousDocuments(t *testing.T) {
	for _, tc := range []struct{ name, doc, field string }{
		{"duplicate YAML key", "dryRun: true\ndryRun: false", "dryRun"},
		{"duplicate JSON key", `{"dryRun":"true","dryRun":"false"}`, "dryRun"},
		{"second document", "dryRun: true\n---\noperation: bogus\n", "spec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := trigger.ParseSpec([]byte(tc.doc), core.ParseSpec)
			require.Error(t, err, "accepted as %+v", o.Spec())
			assert.ErrorIs(t, err, core.ErrInvalid)
			assert.Equal(t, tc.field, dispatch.FieldOf(err))
		})
	}
}
