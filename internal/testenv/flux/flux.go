// Package flux runs the real Flux beside a local control plane (internal/testenv/controlplane),
// for tests: its source-controller and kustomize-controller (built by
// `hack/tools/build.sh source-controller kustomize-controller` from the modules
// hack/tools/flux-source and hack/tools/flux-kustomize pin), their CRDs (read from those
// same modules at run time), the namespace they run for (RUNTIME_NAMESPACE), and a Git
// server for local repositories (GitServer: Flux clones only over http(s) or ssh).
//
// Every port is a loopback port and every file is under Options.Dir. The package's tests
// carry the build tag flux: `make test-flux` builds the binaries and runs them; `make
// test` leaves them out (their cold build, docs/design.md "GitOps with Flux").
package flux

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/freeport"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/harnessproc"
)

// Namespace is the controllers' own namespace (RUNTIME_NAMESPACE: their leader-election
// and event namespace; they watch every namespace).
const Namespace = "flux-system"

// Binaries are what Start runs, built by hack/tools/build.sh.
var Binaries = []string{"source-controller", "kustomize-controller"}

// ErrMissingBinaries means the Flux binaries are not built.
var ErrMissingBinaries = errors.New("flux binaries missing: run `hack/tools/build.sh source-controller kustomize-controller` (make test-flux does it)")

// crdSource is a pinned module (its tools folder under hack/tools) and the folder inside
// it holding CRD manifests.
type crdSource struct{ tools, module, dir string }

var crdSources = []crdSource{
	{tools: "flux-source", module: "github.com/fluxcd/source-controller", dir: "config/crd/bases"},
	{tools: "flux-kustomize", module: "github.com/fluxcd/kustomize-controller", dir: "config/crd/bases"},
}

// Options configures Start. Site's Kubeconfig is the controllers' $KUBECONFIG, its Dir
// holds the logs and the artifact storage, its Root the tools modules hack/tools/flux-*
// pinning the Flux modules, and its BinDir Binaries.
type Options struct {
	controlplane.Site
}

// Flux is a running source-controller and kustomize-controller.
type Flux struct {
	opts  Options
	kc    kubernetes.Interface
	dc    dynamic.Interface
	procs harnessproc.Group
}

// Start installs the CRDs and the namespace and starts source-controller, then
// kustomize-controller, waiting until each answers its readiness probe. On error
// everything started is stopped again.
func Start(ctx context.Context, opts Options) (_ *Flux, err error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if err := harnessproc.CheckBinaries(opts.BinDir, Binaries, ErrMissingBinaries); err != nil {
		return nil, err
	}
	f := &Flux{opts: opts}
	if f.kc, f.dc, err = controlplane.NewClients(opts.RESTConfig); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			f.Stop()
		}
	}()
	begin := time.Now()
	if err := f.install(ctx); err != nil {
		return nil, err
	}
	opts.Logf("flux: CRDs and namespace created (%s)", time.Since(begin).Round(time.Millisecond))
	if err := f.startProcesses(ctx); err != nil {
		return nil, err
	}
	opts.Logf("flux: source-controller and kustomize-controller ready (%s)", time.Since(begin).Round(time.Millisecond))
	return f, nil
}

// Stop stops every process (SIGTERM, then SIGKILL after 10 s). Safe to call twice.
func (f *Flux) Stop() { f.procs.Stop(10 * time.Second) }

// LogTail is the last n lines of a controller's log: "source-controller" or
// "kustomize-controller".
func (f *Flux) LogTail(name string, n int) string { return f.procs.LogTail(name, n) }

// install creates the CRDs of the pinned modules and the controllers' namespace, and
// waits until the apiserver serves the kinds the tests create.
func (f *Flux) install(ctx context.Context) error {
	for _, src := range crdSources {
		if err := f.installCRDs(ctx, src); err != nil {
			return err
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if _, err := f.kc.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", Namespace, err)
	}
	return waitServed(ctx, f.dc)
}

func (f *Flux) installCRDs(ctx context.Context, src crdSource) error {
	mod, err := controlplane.ModuleDirAt(ctx, filepath.Join(f.opts.Root, "hack", "tools", src.tools), src.module)
	if err != nil {
		return err
	}
	crds, err := controlplane.CRDsIn(filepath.Join(mod, src.dir), "*.yaml")
	if err != nil || len(crds) == 0 {
		return fmt.Errorf("no CRDs in %s/%s (%v)", mod, src.dir, err)
	}
	return controlplane.CreateCRDs(ctx, f.dc, crds)
}

// startProcesses starts source-controller (its artifact server on a loopback port it
// also advertises: kustomize-controller downloads every artifact from that URL) and
// kustomize-controller. Metrics and health listeners are on loopback.
func (f *Flux) startProcesses(ctx context.Context) error {
	ports, err := freeport.NOn("127.0.0.1", 5)
	if err != nil {
		return err
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	env := []string{"KUBECONFIG=" + f.opts.Kubeconfig, "RUNTIME_NAMESPACE=" + Namespace, "HOME=" + f.mkdir("home")}
	common := []string{"--events-addr=", "--log-level=debug", "--log-encoding=console", "--enable-leader-election=false"}
	source := append([]string{"--storage-path=" + f.mkdir("storage"), "--storage-addr=" + addr(0), "--storage-adv-addr=" + addr(0),
		"--metrics-addr=" + addr(1), "--health-addr=" + addr(2)}, common...)
	if err := f.run(ctx, "source-controller", addr(2), source, env); err != nil {
		return err
	}
	kustomize := append([]string{"--metrics-addr=" + addr(3), "--health-addr=" + addr(4)}, common...)
	return f.run(ctx, "kustomize-controller", addr(4), kustomize, env)
}

// run starts a controller and waits until its readiness probe on healthAddr answers 200.
func (f *Flux) run(ctx context.Context, name, healthAddr string, args, env []string) error {
	_, err := f.procs.StartReady(ctx, f.opts.Dir, name, filepath.Join(f.opts.BinDir, name), args, env,
		func() error { return ready(ctx, "http://"+healthAddr+"/readyz") })
	return err
}

func ready(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

func (f *Flux) mkdir(name string) string { return harnessproc.Subdir(f.opts.Dir, name) }
