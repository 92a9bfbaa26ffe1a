package devcli_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/controlplane"
	_ "github.com/configmap-attacher/configmap-attacher/internal/devcli"
	"github.com/configmap-attacher/configmap-attacher/internal/testfix"
)

// `make run` (configmap-attacher dev) starts the embedded default, prints the kubeconfig,
// the endpoints and an example, becomes ready, and stops cleanly on Ctrl-C.
func TestDevRunsTheEmbeddedDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the embedded default")
	}
	var out, errOut testfix.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"dev", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--log-level", "warn"},
			cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	}()
	controlplane.Eventually(t, 2*time.Minute, "dev to print its endpoints", func() error {
		select {
		case code := <-done:
			t.Fatalf("dev exited with %d: %s", code, errOut.String())
		default:
		}
		if !strings.Contains(out.String(), "Ctrl-C stops everything") {
			return fmt.Errorf("output so far: %q", out.String())
		}
		return nil
	})
	text := out.String()
	for _, want := range []string{"kubeconfig", "gRPC trigger", "HTTP", "EventBus", "export KUBECONFIG=", "demo --kubeconfig"} {
		assert.Contains(t, text, want)
	}
	kubeconfig := regexp.MustCompile(`kubeconfig\s+(\S+)`).FindStringSubmatch(text)[1]
	httpAddr := regexp.MustCompile(`HTTP\s+(http://\S+)`).FindStringSubmatch(text)[1]
	_, err := os.Stat(kubeconfig)
	require.NoError(t, err)
	controlplane.Eventually(t, time.Minute, "/readyz to answer 200", func() error {
		resp, err := http.Get(httpAddr + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})

	cancel() // Ctrl-C
	select {
	case code := <-done:
		assert.Equal(t, 0, code, "stderr: %s", errOut.String())
	case <-time.After(60 * time.Second):
		t.Fatal("dev did not stop within 60s of Ctrl-C")
	}
	_, err = os.Stat(kubeconfig)
	assert.True(t, os.IsNotExist(err), "temporary files are removed on stop")
}
