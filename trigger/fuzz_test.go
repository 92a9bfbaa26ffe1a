package trigger

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
)

// FuzzParseSpec: any spec document either parses, and then its normalised form parses
// to the same options, or is a *core.FieldError (ErrInvalid) naming a field; never a panic.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"", "dryRun: true\n", `{"configMaps":"a,b","selector":"app=web"}`, "operation: gc\nnamespace: shop",
		"selector: 'a in (b'", "configMaps: kube-system/x", "x: [1, 2]", "- a\n- b", "{{{", "includeSecrets: 3", "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		o, err := ParseSpec(doc, core.ParseSpec)
		if err != nil {
			var fe *core.FieldError
			if !errors.Is(err, core.ErrInvalid) || !errors.As(err, &fe) || fe.Field == "" {
				t.Fatalf("error is not a *core.FieldError naming a field: %v", err)
			}
			if len(err.Error()) > 2048 {
				t.Fatalf("error echoes too much input (%d bytes)", len(err.Error()))
			}
			return
		}
		js, err := NormalizedSpec(o)
		if err != nil {
			t.Fatalf("NormalizedSpec: %v", err)
		}
		again, err := ParseSpec(js, core.ParseSpec)
		if err != nil {
			t.Fatalf("the normalised spec %s does not parse: %v", js, err)
		}
		if !reflect.DeepEqual(o.Spec(), again.Spec()) {
			t.Fatalf("normalising changed the spec: %v vs %v", o.Spec(), again.Spec())
		}
	})
}

// FuzzHTTPEvent: whatever a client sends (body, content type, binary-mode CloudEvent
// headers, query), the receiver answers with a status of safety rule 8 (docs/design.md), never a 500 or a
// panic, and with bad input writes nothing.
func FuzzHTTPEvent(f *testing.F) {
	f.Add([]byte(rsPayload("web-1", "")), "application/json", "", "", "")
	f.Add([]byte(rsPayload("web-1", rsUID)), "application/json", "1.0", "dev.knative.apiserver.resource.add", "dryRun=true")
	f.Add([]byte(`{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-1","namespace":"shop"}}`), "application/json", "1.0", "add", "")
	f.Add([]byte(`{"specversion":"1.0","id":"1","source":"s","type":"add","data":{"type":"ADD","body":{"kind":"ReplicaSet","metadata":{"name":"web-1","namespace":"shop"}}}}`), "application/cloudevents+json", "", "", "")
	f.Add([]byte("{}"), "text/plain", "", "", "selector=a)(")
	f.Add([]byte("\xff\xfe"), "application/json; charset=\"", "0.3", "", "%zz")
	fx := newFixture(f, dispatch.Config{})
	h := NewHTTPServer(fx.d, nil, HTTPOptions{MaxBodyBytes: 64 << 10}).Handler()
	allowed := map[int]bool{200: true, 400: true, 409: true, 413: true, 415: true}
	f.Fuzz(func(t *testing.T, body []byte, ct, specversion, ceType, query string) {
		if strings.ContainsAny(ct+specversion+ceType, "\r\n\x00") {
			return // not sendable as HTTP header values
		}
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(string(body)))
		req.URL.RawQuery = query
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		if specversion != "" {
			req.Header.Set("Ce-Specversion", specversion)
			req.Header.Set("Ce-Id", "fuzz")
			req.Header.Set("Ce-Source", "fuzz")
			req.Header.Set("Ce-Type", ceType)
		}
		before := fx.patches()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !allowed[rec.Code] {
			t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
		}
		if rec.Code != 200 && fx.patches() != before {
			t.Fatalf("status %d but a write happened", rec.Code)
		}
	})
}
