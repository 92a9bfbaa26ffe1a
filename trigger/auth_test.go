package trigger

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
)

const testToken = "tok-9f8e7d6c5b4a"

func TestHTTPBearerToken(t *testing.T) {
	for _, public := range []bool{false, true} {
		f := newFixture(t, dispatch.Config{})
		ts := newHTTP(t, f, HTTPOptions{AuthToken: []byte(testToken), Ops: legacyOps(t, f, []byte(testToken), public)})
		for _, tc := range []struct {
			name, method, path, auth string
			want                     int
			challenge                string
		}{
			{"no token", http.MethodPost, "/", "", 401, `Bearer realm="configmap-attacher"`},
			{"wrong token", http.MethodPost, "/", "Bearer nope", 401, `error="invalid_token"`},
			{"token prefix", http.MethodPost, "/", "Bearer " + testToken[:5], 401, `error="invalid_token"`},
			{"token plus suffix", http.MethodPost, "/", "Bearer " + testToken + "x", 401, `error="invalid_token"`},
			{"basic scheme", http.MethodPost, "/", "Basic " + testToken, 401, `error="invalid_token"`},
			{"right token", http.MethodPost, "/", "Bearer " + testToken, 200, ""},
			{"scheme is case-insensitive", http.MethodPost, "/", "bearer " + testToken, 200, ""},
			{"healthz exempt", http.MethodGet, "/healthz", "", 200, ""},
			{"readyz exempt", http.MethodGet, "/readyz", "", 200, ""},
			{"metrics", http.MethodGet, "/metrics", "", map[bool]int{false: 401, true: 200}[public], map[bool]string{false: "Bearer"}[public]},
			{"metrics with token", http.MethodGet, "/metrics", "Bearer " + testToken, 200, ""},
			{"unknown path needs the token", http.MethodGet, "/x", "", 401, "Bearer"},
		} {
			t.Run(map[bool]string{false: "private-metrics/", true: "public-metrics/"}[public]+tc.name, func(t *testing.T) {
				req, err := http.NewRequest(tc.method, ts.URL+tc.path, strings.NewReader(rsPayload("web-1", "")))
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/json")
				if tc.auth != "" {
					req.Header.Set("Authorization", tc.auth)
				}
				a := do(t, req)
				assert.Equal(t, tc.want, a.status, a.raw)
				if tc.challenge != "" {
					assert.Contains(t, a.header.Get("WWW-Authenticate"), tc.challenge)
				}
				assert.NotContains(t, a.raw, testToken, "the answer never echoes the token")
				assert.NotContains(t, a.raw, "nope")
			})
		}
		assert.Equal(t, 1, f.patches(), "only an authenticated POST wrote (the second found it attached); public=%v", public)
	}
}

func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	for _, tc := range []struct {
		name, path, want, err string
	}{
		{"trimmed", write("ok", "  s3cr3t-value\n"), "s3cr3t-value", ""},
		{"empty", write("empty", " \n"), "", "is empty"},
		{"inner space", write("space", "s3cr3t value"), "", "white space"},
		{"too long", write("long", strings.Repeat("a", MaxTokenBytes+1)), "", "at most"},
		{"missing", filepath.Join(dir, "missing"), "", "reading the HTTP token file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LoadToken(tc.path)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				assert.NotContains(t, err.Error(), "s3cr3t", "errors never carry the token")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
}
