// Package externalsecrets runs the real External Secrets Operator (ESO) beside a local
// control plane (internal/testenv/controlplane), for tests: the controller binary built by
// `hack/tools/build.sh external-secrets` from the module pinned in hack/tools/eso, run
// as a bare process with KUBECONFIG (no webhook, no cert controller), and its CRDs read
// from that same module's config/crds/bases at run time (never copied into this
// repository). Its `fake` provider serves the values a SecretStore's spec lists, so no
// cloud is needed (docs/design.md, "External Secrets").
//
// The controller's metrics server is its only listener: it gets a free loopback port.
// Every file is under Options.Dir.
package externalsecrets

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/freeport"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/harnessproc"
)

// Binary is the controller binary Start runs, built into the bin folder by
// `hack/tools/build.sh external-secrets`.
const Binary = "external-secrets"

// Module is the pinned Go module the binary and the CRDs come from.
const Module = "github.com/external-secrets/external-secrets"

// ErrMissingBinary means the controller is not built: run `hack/tools/build.sh external-secrets`.
var ErrMissingBinary = errors.New("external-secrets binary missing: run `hack/tools/build.sh external-secrets`")

// Options configures Start. Site's Kubeconfig is the controller's KUBECONFIG, its Dir
// holds the log, its Root the tools module hack/tools/eso pinning the module, and its
// BinDir Binary.
type Options struct {
	controlplane.Site
}

// ESO is a running External Secrets controller.
type ESO struct {
	opts    Options
	procs   harnessproc.Group
	proc    *harnessproc.Process
	metrics string
}

// Start installs the CRDs and starts the controller, waiting until its metrics server
// listens. On error everything started is stopped again.
func Start(ctx context.Context, opts Options) (*ESO, error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if err := harnessproc.CheckBinaries(opts.BinDir, []string{Binary}, ErrMissingBinary); err != nil {
		return nil, err
	}
	begin := time.Now()
	mod, err := ModuleDir(ctx, opts.Root)
	if err != nil {
		return nil, err
	}
	if err := installCRDs(ctx, opts.RESTConfig, mod); err != nil {
		return nil, err
	}
	opts.Logf("externalsecrets: CRDs established (%s)", time.Since(begin).Round(time.Millisecond))
	port, err := freeport.On("127.0.0.1")
	if err != nil {
		return nil, err
	}
	e := &ESO{opts: opts, metrics: "127.0.0.1:" + strconv.Itoa(port)}
	args := []string{"--metrics-addr", e.metrics, "--enable-leader-election=false", "--loglevel", "debug",
		"--zap-time-encoding", "iso8601", "--concurrent", "2"}
	e.proc, err = e.procs.StartReady(ctx, opts.Dir, "external-secrets", filepath.Join(opts.BinDir, Binary), args,
		[]string{"KUBECONFIG=" + opts.Kubeconfig}, func() error { return harnessproc.Listening(e.metrics) })
	if err != nil {
		e.Stop()
		return nil, err
	}
	opts.Logf("externalsecrets: controller listening on %s (%s)", e.metrics, time.Since(begin).Round(time.Millisecond))
	return e, nil
}

// Stop stops the controller (SIGTERM, then SIGKILL after 10 s). Safe to call twice.
func (e *ESO) Stop() { e.procs.Stop(10 * time.Second) }

// MetricsAddr is the controller's metrics address (host:port).
func (e *ESO) MetricsAddr() string { return e.metrics }

// Log is the controller's whole log so far.
func (e *ESO) Log() string {
	data, _ := os.ReadFile(e.proc.LogPath())
	return string(data)
}

// LogTail is the last n lines of the controller's log.
func (e *ESO) LogTail(n int) string { return e.proc.Tail(n) }

// ModuleDir returns the module-cache folder of the module hack/tools/eso pins,
// downloading (and checksum-verifying against its go.sum) it if needed.
func ModuleDir(ctx context.Context, root string) (string, error) {
	return controlplane.ModuleDirAt(ctx, filepath.Join(root, "hack", "tools", "eso"), Module)
}
