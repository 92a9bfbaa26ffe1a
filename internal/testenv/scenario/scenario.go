// Package scenario is the harness the end-to-end test packages share (internal/e2e/acceptance,
// internal/testenv/argocd): a scenario's namespace on a local control plane, configmap-attacher
// run in-process for it, and the ways in fed by the real Argo Events binaries (the
// shipped EventSource and Sensor, a NATS JetStream EventBus).
package scenario

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// World is one scenario: its namespace on a control plane and the clients to it.
type World struct {
	T       testing.TB
	Ctx     context.Context
	NS      string
	Plane   *controlplane.ControlPlane
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Log is the service's logger (Logger's).
	Log *slog.Logger
	// WaitFor bounds every Eventually: a bound for a stuck test, not a timed assertion.
	WaitFor time.Duration
}

// New is the World of namespace ns on the control plane cp (nothing is created), whose
// context ends after budget or at cleanup.
func New(t testing.TB, cp *controlplane.ControlPlane, ns string, budget, waitFor time.Duration, log *slog.Logger) *World {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	t.Cleanup(cancel)
	dc, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &World{T: t, Ctx: ctx, NS: ns, Plane: cp, Kube: cp.Client(), Dynamic: dc, Log: log, WaitFor: waitFor}
}

// Logger is a service logger: debug to stderr when the test runs verbose and env is set,
// else discarded.
func Logger(name, env string, verbose bool) *slog.Logger {
	if verbose && os.Getenv(env) != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", name)
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// CreateNamespace creates the namespace and waits for its default ServiceAccount.
func (w *World) CreateNamespace() {
	w.T.Helper()
	if _, err := w.Kube.CoreV1().Namespaces().Create(w.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.NS}}, metav1.CreateOptions{}); err != nil {
		w.T.Fatalf("create namespace: %v", err)
	}
	w.Eventually("the namespace's default ServiceAccount", func() error {
		_, err := w.Kube.CoreV1().ServiceAccounts(w.NS).Get(w.Ctx, "default", metav1.GetOptions{})
		return err
	})
}

// Eventually is controlplane.Eventually with the scenario's bound.
func (w *World) Eventually(what string, cond func() error) {
	w.T.Helper()
	controlplane.Eventually(w.T, w.WaitFor, what, cond)
}

// Serve runs configmap-attacher in-process on loopback for the namespace, with the ways
// in of in (gRPC, HTTP and the revision side always run), and waits until it is ready.
// It stops at cleanup.
func (w *World) Serve(in server.Ingress, o server.Options) *server.Server {
	w.T.Helper()
	o.GRPCAddr, o.HTTPAddr, o.Namespace, o.Logger, o.ShutdownTimeout = "127.0.0.1:0", "127.0.0.1:0", w.NS, w.Log, 5*time.Second
	o.Ingress = in
	srv, err := server.New(w.Plane.RESTConfig(), o)
	if err != nil {
		w.T.Fatalf("server.New: %v", err)
	}
	ctx, cancel := context.WithCancel(w.Ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	w.T.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			w.T.Errorf("server.Run: %v", err)
		}
	})
	w.Eventually("the service ready", func() error {
		select {
		case err := <-done:
			w.T.Fatalf("the service stopped: %v", err)
		default:
		}
		return ready(srv.HTTPAddr())
	})
	return srv
}

func ready(addr string) error {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("/readyz %d: %s", resp.StatusCode, b)
	}
	return nil
}

// ServeWatcher runs the service with the built-in watcher (serve --watch).
func (w *World) ServeWatcher() *server.Server {
	w.T.Helper()
	return w.Serve(server.Ingress{Watch: true}, server.Options{})
}

// WaitGone waits until get answers NotFound.
func (w *World) WaitGone(what string, get func() error) {
	w.T.Helper()
	w.Eventually(what+" deleted", func() error {
		if err := get(); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s still there (err %v)", what, err)
		}
		return nil
	})
}

// Revisions returns the names of the namespace's opted-in ConfigMaps.
func (w *World) Revisions() map[string]bool {
	w.T.Helper()
	list, err := w.Kube.CoreV1().ConfigMaps(w.NS).List(w.Ctx, metav1.ListOptions{LabelSelector: core.LabelRevision + "=true"})
	if err != nil {
		w.T.Fatal(err)
	}
	out := map[string]bool{}
	for _, cm := range list.Items {
		out[cm.Name] = true
	}
	return out
}
