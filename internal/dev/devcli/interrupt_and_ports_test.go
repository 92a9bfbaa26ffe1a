package devcli_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/dev/devcli"
	"github.com/configmap-attacher/configmap-attacher/internal/dev/devenv"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// A demo stopped with Ctrl-C says DEMO INTERRUPTED and exits 130, not DEMO FAILED: no
// step failed. The cluster is an apiserver stand-in that never answers, so the demo is
// mid-request when the signal comes.
func TestInterruptedDemoSaysInterrupted(t *testing.T) {
	asked := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	defer srv.Close()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["stand-in"] = &clientcmdapi.Cluster{Server: srv.URL}
	cfg.AuthInfos["user"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["stand-in"] = &clientcmdapi.Context{Cluster: "stand-in", AuthInfo: "user"}
	cfg.CurrentContext = "stand-in"
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, kubeconfig))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var out, errOut testfix.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"demo", "--kubeconfig", kubeconfig, "--namespace", "demo-x"},
			cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut}, devcli.Commands()...)
	}()
	select {
	case <-asked:
	case code := <-done:
		t.Fatalf("the demo ended (%d) before asking the cluster: %s %s", code, out.String(), errOut.String())
	case <-time.After(time.Minute):
		t.Fatal("the demo never asked the cluster")
	}
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGINT))
	var code int
	select {
	case code = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the demo did not stop on SIGINT")
	}
	assert.Equal(t, cli.ExitInterrupted, code, "stdout: %s\nstderr: %s", out.String(), errOut.String())
	assert.Contains(t, out.String(), "DEMO INTERRUPTED after 0 steps")
	assert.NotContains(t, out.String(), "DEMO FAILED")
	assert.Contains(t, errOut.String(), "error: interrupted (SIGINT)")
}

// A second `make run` fails at once when its ports are taken, before it starts a control
// plane, and says how to run a second one.
func TestSecondRunFailsAtOnceOnATakenPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	for _, args := range [][]string{
		{"dev", "--grpc-addr", l.Addr().String(), "--http-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0"},
		{"dev", "--grpc-addr", "127.0.0.1:0", "--http-addr", l.Addr().String(), "--metrics-addr", "127.0.0.1:0"},
		{"dev", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--metrics-addr", l.Addr().String()},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second) // a bound: a started control plane takes longer
			defer cancel()
			var out, errOut testfix.SyncBuffer
			code := cli.Main(ctx, args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut}, devcli.Commands()...)
			assert.Equal(t, cli.ExitFailure, code, errOut.String())
			assert.Contains(t, errOut.String(), l.Addr().String()+" is in use")
			assert.Contains(t, errOut.String(), `make run ARGS="`+devenv.FreePortsArgs+`"`)
			assert.NotContains(t, errOut.String(), "starting the local control plane", "nothing started")
			assert.Empty(t, out.String())
		})
	}
}
