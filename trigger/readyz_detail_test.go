package trigger

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
)

// /readyz without credentials says only ready or not: the detail (member clusters,
// their server URLs, probe errors) is shown only with the bearer token.
func TestReadyzDetailOnlyWithTheToken(t *testing.T) {
	const detail = "member-b DOWN: Get \"https://10.0.0.7:6443/readyz\": dial tcp: connection refused\n"
	for _, tt := range []struct {
		name, configured, sent string
		ready                  bool
		want                   string
	}{
		{name: "no token configured", ready: true, want: "ok\n"},
		{name: "no token configured, not ready", ready: false, want: "not ready\n"},
		{name: "no token sent", configured: "s3cret", ready: true, want: "ok\n"},
		{name: "a wrong token", configured: "s3cret", sent: "guess", ready: false, want: "not ready\n"},
		{name: "the token", configured: "s3cret", sent: "s3cret", ready: false, want: "not ready\n" + detail},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, dispatch.Config{})
			o := HTTPOptions{Ready: func() (bool, string) { return tt.ready, detail }}
			if tt.configured != "" {
				o.AuthToken = []byte(tt.configured)
			}
			ts := newHTTP(t, f, o)
			req := mustReq(t, http.MethodGet, ts.URL+"/readyz")
			if tt.sent != "" {
				req.Header.Set("Authorization", "Bearer "+tt.sent)
			}
			a := do(t, req)
			assert.Equal(t, tt.want, a.raw)
			assert.NotEqual(t, http.StatusUnauthorized, a.status, "/readyz itself needs no token")
		})
	}
}
