package cli_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// TestServeKeepsCredentialsOutOfLogs runs `serve` at debug level with an HTTP token and
// an EventBus password, sends requests without, with a wrong and with the right token,
// then runs it again with a wrong EventBus password: neither credential (nor the wrong
// token sent) appears in any log line, HTTP answer or error.
func TestServeKeepsCredentialsOutOfLogs(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ctx := context.Background()
	ns := newNamespace(t, cp)
	const (
		httpToken = "http-tok-3c1f0a9e7b"
		busPass   = "bus-pw-8d2e6f4a1c"
		wrongTok  = "guess-tok-55aa77"
		wrongPass = "wrong-pw-99bb11"
	)
	nats, err := natsserver.Start(ctx, natsserver.Options{User: "attacher", Password: busPass})
	require.NoError(t, err)
	t.Cleanup(nats.Stop)
	nc, err := nats.Connect()
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "default", Subjects: []string{"default.>"}})
	require.NoError(t, err)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content+"\n"), 0o600))
		return p
	}
	tokenFile, passFile, wrongFile := write("token", httpToken), write("pass", busPass), write("wrong", wrongPass)
	args := func(pass string) []string {
		return []string{"serve", "--kubeconfig", cp.Kubeconfig(), "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
			"--log-level", "debug", "--http-token-file", tokenFile, "--namespaces", ns + ",other", "--exclude-namespaces", "kube-system",
			"--eventbus-url", nats.ClientURL(), "--eventbus-user", "attacher", "--eventbus-password-file", pass,
			"--eventbus-tls-ca-file", nats.CAFile(), "--eventbus-stream", "default"}
	}

	var out testfix.SyncBuffer
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(runCtx, args(passFile), cli.Streams{In: strings.NewReader(""), Out: &out, Err: &out})
	}()
	addrRE := regexp.MustCompile(`http=(127\.0\.0\.1:\d+)`)
	var addr string
	controlplane.Eventually(t, 30*time.Second, "serve to listen", func() error {
		select {
		case code := <-done:
			t.Fatalf("serve exited with %d: %s", code, out.String())
		default:
		}
		m := addrRE.FindStringSubmatch(out.String())
		if m == nil {
			return fmt.Errorf("no address logged yet")
		}
		addr = m[1]
		return nil
	})
	var answers []string
	for _, tc := range []struct {
		name, auth, path string
		want             int
	}{
		{"no token", "", "/", 401},
		{"wrong token", "Bearer " + wrongTok, "/", 401},
		{"right token, bad payload", "Bearer " + httpToken, "/", 400},
		{"readyz needs none", "", "/readyz", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodPost
			if tc.path != "/" {
				method = http.MethodGet
			}
			req, err := http.NewRequest(method, "http://"+addr+tc.path, strings.NewReader(`{"type":"ADD","body":{"kind":"ReplicaSet","metadata":{"name":"x","namespace":"kube-system"}}}`+"junk"))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers = append(answers, string(b))
			if tc.want != 0 {
				assert.Equal(t, tc.want, resp.StatusCode, string(b))
			}
		})
	}
	controlplane.Eventually(t, 30*time.Second, "subscribed to the EventBus", func() error {
		if !strings.Contains(out.String(), "subscribed to the EventBus") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, out.String())
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop")
	}

	// A wrong EventBus password: serve fails (or retries) and says why, without a secret.
	var bad testfix.SyncBuffer
	badCtx, badCancel := context.WithTimeout(ctx, 20*time.Second)
	defer badCancel()
	code := cli.Main(badCtx, args(wrongFile), cli.Streams{In: strings.NewReader(""), Out: &bad, Err: &bad})
	t.Logf("serve with a wrong EventBus password exited %d", code)
	assert.Contains(t, strings.ToLower(bad.String()), "authorization", "the failure is explained")

	all := out.String() + bad.String() + strings.Join(answers, "\n")
	for _, secret := range []string{httpToken, busPass, wrongTok, wrongPass} {
		assert.NotContains(t, all, secret, "a credential leaked into logs, answers or errors")
	}
	assert.Contains(t, out.String(), "httpAuth=true", "the log says auth is on, without the token")
}
