// Package argocd runs the real Argo CD beside a local control plane
// (internal/testenv/controlplane), for tests: its application controller and repo-server (the
// one argocd binary built by `make tools`, picked by ARGOCD_BINARY_NAME), a Redis
// (bin/redis), Helm and Kustomize on the repo-server's PATH, and what argocd-server
// would normally create: the CRDs (read from the pinned argo-cd module, the version the
// binary is built from), the argocd namespace, argocd-cm and argocd-secret, and the
// default AppProject. Git repositories are local folders served by file:// URLs (Repo).
//
// Every port is a free loopback port (the metrics servers bind every interface, so they
// get free ports too) and every file is under Options.Dir.
package argocd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/freeport"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/harnessproc"
)

// Namespace is Argo CD's own namespace (the controller's --namespace).
const Namespace = "argocd"

// Binaries are what Start runs or puts on the repo-server's PATH, built by `make tools`.
var Binaries = []string{"argocd", "redis", "helm", "kustomize"}

// ErrMissingBinaries means the Argo CD binaries are not built: run `make tools`.
var ErrMissingBinaries = errors.New("argo CD binaries missing: run `make tools`")

// Options configures Start. Site's Kubeconfig is the controller's --kubeconfig
// (https://kubernetes.default.svc goes through it), its Dir holds the logs, the TLS and
// SSH data and the PATH folder, its Root the tools module hack/tools/argocd pinning the
// argo-cd module, and its BinDir Binaries.
type Options struct {
	controlplane.Site
	// Reconciliation is argocd-cm's timeout.reconciliation (default 10s).
	Reconciliation time.Duration
}

// ArgoCD is a running Argo CD (controller, repo-server, Redis).
type ArgoCD struct {
	opts  Options
	kc    kubernetes.Interface
	dc    dynamic.Interface
	procs harnessproc.Group
}

// Start creates Argo CD's objects and starts Redis, the repo-server and the
// application controller, waiting until each listens. On error everything started is
// stopped again.
func Start(ctx context.Context, opts Options) (_ *ArgoCD, err error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.Reconciliation == 0 {
		opts.Reconciliation = 10 * time.Second
	}
	if err := harnessproc.CheckBinaries(opts.BinDir, Binaries, ErrMissingBinaries); err != nil {
		return nil, err
	}
	a := &ArgoCD{opts: opts}
	if a.kc, a.dc, err = controlplane.NewClients(opts.RESTConfig); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			a.Stop()
		}
	}()
	begin := time.Now()
	mod, err := moduleDir(ctx, opts.Root)
	if err != nil {
		return nil, err
	}
	if err := a.install(ctx, mod); err != nil {
		return nil, err
	}
	opts.Logf("argocd: CRDs, namespace, settings and AppProject created (%s)", time.Since(begin).Round(time.Millisecond))
	if err := a.startProcesses(ctx, mod); err != nil {
		return nil, err
	}
	opts.Logf("argocd: Redis, repo-server and application controller listening (%s)", time.Since(begin).Round(time.Millisecond))
	return a, nil
}

// Stop stops every process (SIGTERM, then SIGKILL after 10 s). Safe to call twice.
func (a *ArgoCD) Stop() { a.procs.Stop(10 * time.Second) }

// LogTail is the last n lines of a process's log: "redis", "repo-server" or
// "application-controller".
func (a *ArgoCD) LogTail(name string, n int) string { return a.procs.LogTail(name, n) }

// startProcesses starts Redis, then the repo-server (plain gRPC on loopback, with
// the scripts its image ships on PATH beside helm and kustomize), then the controller.
func (a *ArgoCD) startProcesses(ctx context.Context, mod string) error {
	ports, err := freeport.NOn("127.0.0.1", 6)
	if err != nil {
		return err
	}
	redis := "127.0.0.1:" + strconv.Itoa(ports[0])
	repo := "127.0.0.1:" + strconv.Itoa(ports[1])
	if err := a.run(ctx, "redis", redis, filepath.Join(a.opts.BinDir, "redis"), []string{"-port", strconv.Itoa(ports[0])}, nil); err != nil {
		return err
	}
	pathDir, err := a.scriptsDir(mod)
	if err != nil {
		return err
	}
	argocd := filepath.Join(a.opts.BinDir, "argocd")
	repoArgs := []string{"--address", "127.0.0.1", "--port", strconv.Itoa(ports[1]),
		"--metrics-address", "127.0.0.1", "--metrics-port", strconv.Itoa(ports[2]),
		"--redis", redis, "--disable-tls", "--client-ca-path=", "--loglevel", "info"}
	repoEnv := []string{"ARGOCD_BINARY_NAME=argocd-repo-server", "ARGOCD_GPG_ENABLED=false",
		"ARGOCD_TLS_DATA_PATH=" + a.mkdir("tls"), "ARGOCD_SSH_DATA_PATH=" + a.mkdir("ssh"),
		"ARGOCD_GNUPGHOME=" + a.mkdir("gnupg"), "HOME=" + a.mkdir("home"),
		"PATH=" + pathDir + string(os.PathListSeparator) + a.opts.BinDir + string(os.PathListSeparator) + os.Getenv("PATH")}
	if err := a.run(ctx, "repo-server", repo, argocd, repoArgs, repoEnv); err != nil {
		return err
	}
	ctrlArgs := []string{"--kubeconfig", a.opts.Kubeconfig, "--namespace", Namespace, "--redis", redis,
		"--repo-server", repo, "--repo-server-plaintext", "--metrics-port", strconv.Itoa(ports[3]),
		"--app-resync", strconv.Itoa(int(a.opts.Reconciliation.Seconds())), "--loglevel", "info",
		// Each resource's health in the Application's status (v3 keeps it out by default),
		// for tests and failure messages.
		"--persist-resource-health"}
	ctrlEnv := []string{"ARGOCD_BINARY_NAME=argocd-application-controller", "ARGOCD_FAKE_IN_CLUSTER=true",
		"KUBECONFIG=" + a.opts.Kubeconfig, "HOME=" + a.mkdir("home")}
	return a.run(ctx, "application-controller", "127.0.0.1:"+strconv.Itoa(ports[3]), argocd, ctrlArgs, ctrlEnv)
}

// run starts a process and waits until it listens on addr.
func (a *ArgoCD) run(ctx context.Context, name, addr, bin string, args, env []string) error {
	_, err := a.procs.StartReady(ctx, a.opts.Dir, name, bin, args, env, func() error { return harnessproc.Listening(addr) })
	return err
}

func (a *ArgoCD) mkdir(name string) string { return harnessproc.Subdir(a.opts.Dir, name) }

// scriptsDir copies the scripts the repo-server runs from PATH (git-verify-wrapper.sh,
// always, and git-ask-pass.sh) out of the module's hack folder: files in the module
// cache have no execute bit.
func (a *ArgoCD) scriptsDir(mod string) (string, error) {
	dir := a.mkdir("path")
	for _, s := range []string{"git-verify-wrapper.sh", "git-ask-pass.sh"} {
		data, err := os.ReadFile(filepath.Join(mod, "hack", s))
		if err != nil {
			return "", fmt.Errorf("argo-cd module: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, s), data, 0o755); err != nil { //nolint:gosec // executable by design
			return "", err
		}
	}
	return dir, nil
}

func randomKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
