package server_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/server"
)

// TestOpsPathsSpelledOtherwiseNeedTheToken: /metrics, pprof and /readyz's detail stay
// behind the token however the path is written (dot segments, double slashes, a
// trailing slash, an encoded slash, upper case), on the ops listener and on the
// receiver's old paths, and an oversized header is refused.
func TestOpsPathsSpelledOtherwiseNeedTheToken(t *testing.T) {
	const token = "ops-token"
	srv := runOps(t, server.Options{GRPCAddr: "-", HTTPAddr: "127.0.0.1:0", HTTPToken: []byte(token), Pprof: true})
	raw := func(addr, target string, extra string) (int, string) {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		_, err = fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n%sConnection: close\r\n\r\n", target, extra)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		return resp.StatusCode, b.String()
	}
	for _, addr := range []string{srv.MetricsAddr(), srv.HTTPAddr()} {
		for _, target := range []string{"/metrics", "/x/../metrics", "//metrics", "/metrics/", "/%6detrics", "/METRICS",
			"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/../pprof/goroutine?debug=2", "/debug//pprof/cmdline",
			"/readyz/../metrics", "http://x/metrics"} {
			code, body := raw(addr, target, "")
			assert.NotContains(t, body, "configmap_attacher_", "%s%s", addr, target)
			assert.NotContains(t, body, "goroutine profile", "%s%s", addr, target)
			assert.NotEqual(t, http.StatusOK, code, "%s%s: %s", addr, target, body)
		}
		_, body := raw(addr, "/readyz", "")
		assert.NotContains(t, body, "in-cluster", "%s /readyz without the token shows no detail", addr)
		code, _ := raw(addr, "/healthz", "X-Big: "+strings.Repeat("a", 200<<10)+"\r\n")
		assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, code, "%s: a 200 KiB header", addr)
	}
}
