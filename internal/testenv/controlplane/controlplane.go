// Package controlplane starts a real, local Kubernetes control plane for tests,
// benchmarks and the demo: etcd, kube-apiserver (RBAC on, an admin token, service-account
// signing keys, a serving certificate) and kube-controller-manager (garbage collector,
// namespace, service-account, Deployment and ReplicaSet controllers), each a process
// built by `make tools` into ./bin, on free loopback ports in a temporary directory.
// It then installs the Argo Rollouts and Argo Events CRDs read from the pinned modules'
// own manifests (hack/tools/crds/go.mod) and writes a kubeconfig. With
// Options.Workloads it also runs what real Pods and canaries need: kube-scheduler, kwok
// (one fake Node on which Pods turn Running and Ready) and the Argo Rollouts controller.
//
// Several control planes can run at once (every port and file is private to one).
package controlplane

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/freeport"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/harnessproc"
)

// ErrMissingBinaries means the control-plane binaries are not built: run `make tools`.
var ErrMissingBinaries = errors.New("control-plane binaries missing: run `make tools`")

// Options configures Start. The zero value is ready to use.
type Options struct {
	// BinDir holds etcd, kube-apiserver and kube-controller-manager. Default:
	// $CONFIGMAP_ATTACHER_BIN_DIR, else <repository>/bin.
	BinDir string
	// Dir is the working directory (data, certificates, logs, kubeconfig). Default: a
	// new temporary directory, removed by Stop.
	Dir string
	// Name labels this control plane in the kubeconfig (cluster and context name) and logs.
	// Default "local".
	Name string
	// SkipCRDs leaves the Argo Rollouts and Argo Events CRDs uninstalled.
	SkipCRDs bool
	// Controllers overrides kube-controller-manager's --controllers list.
	Controllers []string
	// Workloads also starts kube-scheduler, kwok with a fake Node and the Argo Rollouts
	// controller (WorkloadBinaries), so that Rollouts and Deployments get real
	// ReplicaSets and Ready Pods. Needs the CRDs (not SkipCRDs). Default off: tests that
	// need no Pods start without them.
	Workloads bool
	// Rollouts is the Argo Rollouts version to run and install the CRDs of: a key of
	// RolloutsReleases ("v1.8", "v1.10"). Default: $CONFIGMAP_ATTACHER_ROLLOUTS, else
	// DefaultRollouts.
	Rollouts string
	// APIServerArgs are extra kube-apiserver flags, such as
	// --enable-admission-plugins=OwnerReferencesPermissionEnforcement (a plugin many
	// distributions turn on).
	APIServerArgs []string
	// Logf receives progress lines; nil means silent.
	Logf func(format string, args ...any)
	// StartTimeout bounds the whole start; default 2 minutes (3 with Workloads).
	StartTimeout time.Duration
}

// DefaultControllers are the kube-controller-manager controllers started: the garbage
// collector is the one that deletes revisions whose owners are gone.
var DefaultControllers = []string{
	"garbage-collector-controller", "namespace-controller", "serviceaccount-controller",
	"deployment-controller", "replicaset-controller",
}

// ControlPlane is a running local control plane.
type ControlPlane struct {
	opts       Options
	dir        string
	ownDir     bool
	binDir     string
	serverURL  string
	adminToken string
	caPEM      []byte
	kubeconfig string
	etcdURL    string
	kcmPort    int
	kcmSAKey   string
	rollouts   RolloutsRelease

	mu    sync.Mutex
	procs []*harnessproc.Process
	// apiserverArgs are kept so RestartAPIServer can start it again (fault tests).
	apiserverArgs []string
}

// Start starts etcd, kube-apiserver and kube-controller-manager and waits until they are
// ready and the CRDs are established. On error everything started is stopped again.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	if opts.Name == "" {
		opts.Name = "local"
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 2 * time.Minute
		if opts.Workloads {
			opts.StartTimeout = 3 * time.Minute
		}
	}
	if opts.Workloads && opts.SkipCRDs {
		return nil, errors.New("controlplane: Workloads needs the CRDs (SkipCRDs is set)")
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if len(opts.Controllers) == 0 {
		opts.Controllers = DefaultControllers
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	cp := &ControlPlane{opts: opts}
	if cp.rollouts, err = ResolveRollouts(opts.Rollouts); err != nil {
		return nil, err
	}
	cp.binDir, err = binDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	need := []string{"etcd", "kube-apiserver", "kube-controller-manager"}
	if opts.Workloads {
		need = append(need, workloadBinaries(cp.rollouts)...)
	}
	for _, b := range need {
		if _, err := os.Stat(filepath.Join(cp.binDir, b)); err != nil {
			return nil, fmt.Errorf("%w (%s not found in %s)", ErrMissingBinaries, b, cp.binDir)
		}
	}
	cp.dir = opts.Dir
	if cp.dir == "" {
		cp.dir, err = os.MkdirTemp("", "cma-controlplane-"+opts.Name+"-")
		if err != nil {
			return nil, err
		}
		cp.ownDir = true
	} else if err := os.MkdirAll(cp.dir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w%s", err, cp.logTails())
			_ = cp.Stop()
		}
	}()
	start := time.Now()
	if err := cp.startEtcd(ctx); err != nil {
		return nil, err
	}
	opts.Logf("controlplane %s: etcd ready at %s (%s)", opts.Name, cp.etcdURL, time.Since(start).Round(time.Millisecond))
	if err := cp.startAPIServer(ctx); err != nil {
		return nil, err
	}
	opts.Logf("controlplane %s: kube-apiserver ready at %s (%s)", opts.Name, cp.serverURL, time.Since(start).Round(time.Millisecond))
	if err := cp.startControllerManager(ctx); err != nil {
		return nil, err
	}
	opts.Logf("controlplane %s: kube-controller-manager ready (%s)", opts.Name, time.Since(start).Round(time.Millisecond))
	if !opts.SkipCRDs {
		if err := cp.installCRDs(ctx); err != nil {
			return nil, err
		}
		opts.Logf("controlplane %s: Argo Rollouts and Argo Events CRDs established (%s)", opts.Name, time.Since(start).Round(time.Millisecond))
	}
	if err := cp.waitDefaultServiceAccount(ctx); err != nil {
		return nil, err
	}
	if opts.Workloads {
		if err := cp.startWorkloads(ctx); err != nil {
			return nil, err
		}
	}
	return cp, nil
}

// Dir is the control plane's working directory.
func (cp *ControlPlane) Dir() string { return cp.dir }

// BinDir is the folder the control plane's binaries come from (make tools' ./bin).
func (cp *ControlPlane) BinDir() string { return cp.binDir }

// Rollouts is the Argo Rollouts release this control plane runs (Options.Rollouts).
func (cp *ControlPlane) Rollouts() RolloutsRelease { return cp.rollouts }

// Name is the cluster and context name written in the kubeconfig.
func (cp *ControlPlane) Name() string { return cp.opts.Name }

// Kubeconfig is the path of an admin kubeconfig for this control plane.
func (cp *ControlPlane) Kubeconfig() string { return cp.kubeconfig }

// ServerURL is the kube-apiserver URL (https://127.0.0.1:PORT).
func (cp *ControlPlane) ServerURL() string { return cp.serverURL }

// CAData is the PEM CA bundle that signs the apiserver's serving certificate.
func (cp *ControlPlane) CAData() []byte { return append([]byte(nil), cp.caPEM...) }

// AdminToken is the bearer token of the admin user (group system:masters).
func (cp *ControlPlane) AdminToken() string { return cp.adminToken }

// RESTConfig returns a new admin client configuration.
func (cp *ControlPlane) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            cp.serverURL,
		BearerToken:     cp.adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: cp.CAData()},
		QPS:             200,
		Burst:           400,
	}
}

// TokenConfig returns a client configuration authenticating with token (for example a
// ServiceAccount token from the TokenRequest API), to test least-privilege RBAC.
func (cp *ControlPlane) TokenConfig(token string) *rest.Config {
	c := cp.RESTConfig()
	c.BearerToken = token
	return c
}

// Client returns an admin clientset.
func (cp *ControlPlane) Client() kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(cp.RESTConfig())
}

// Stop stops every process (SIGTERM, then SIGKILL after 10 s) and removes the working
// directory if Start created it. It is safe to call more than once.
func (cp *ControlPlane) Stop() error {
	cp.mu.Lock()
	procs := cp.procs
	cp.procs = nil
	cp.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop(10 * time.Second)
	}
	if cp.ownDir && cp.dir != "" {
		return os.RemoveAll(cp.dir)
	}
	return nil
}

func binDir(dir string) (string, error) {
	if dir == "" {
		dir = os.Getenv("CONFIGMAP_ATTACHER_BIN_DIR")
	}
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrMissingBinaries, err)
		}
		dir = filepath.Join(root, "bin")
	}
	return filepath.Abs(dir)
}

// RepoRoot finds the configmap-attacher repository root by walking up from the working
// directory to the folder holding hack/tools/crds/go.mod.
func RepoRoot() (string, error) {
	if r := os.Getenv("CONFIGMAP_ATTACHER_ROOT"); r != "" {
		return r, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "tools", "crds", "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root not found (no hack/tools/crds/go.mod above the working directory); set CONFIGMAP_ATTACHER_ROOT")
		}
		dir = parent
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago, below the
// kernel's ephemeral range (package freeport).
func FreePort() (int, error) { return freeport.On("127.0.0.1") }

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	clientPort, err := FreePort()
	if err != nil {
		return err
	}
	peerPort, err := FreePort()
	if err != nil {
		return err
	}
	cp.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	args := []string{
		"--name=default",
		"--data-dir=" + filepath.Join(cp.dir, "etcd"),
		"--listen-client-urls=" + cp.etcdURL,
		"--advertise-client-urls=" + cp.etcdURL,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		"--unsafe-no-fsync=true", // throwaway data: fsync only slows tests down
		"--quota-backend-bytes=8589934592",
		"--log-level=warn",
	}
	if err := cp.run("etcd", args); err != nil {
		return err
	}
	return cp.waitEtcdHealthy(ctx)
}

// waitEtcdHealthy polls etcd's /health until it reports healthy or ctx ends.
func (cp *ControlPlane) waitEtcdHealthy(ctx context.Context) error {
	client := &http.Client{Timeout: 2 * time.Second}
	return cp.poll(ctx, "etcd", func() error {
		resp, err := client.Get(cp.etcdURL + "/health")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"true"`)) {
			return fmt.Errorf("etcd /health: %d %s", resp.StatusCode, body)
		}
		return nil
	})
}

func (cp *ControlPlane) startAPIServer(ctx context.Context) error {
	p, err := newPKI()
	if err != nil {
		return err
	}
	cp.caPEM = p.caCertPEM
	caFile := filepath.Join(cp.dir, "ca.crt")
	if err := os.WriteFile(caFile, p.caCertPEM, 0o600); err != nil {
		return err
	}
	certFile, keyFile := filepath.Join(cp.dir, "apiserver.crt"), filepath.Join(cp.dir, "apiserver.key")
	if err := p.issue(certFile, keyFile, "kube-apiserver", nil,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}, x509.ExtKeyUsageServerAuth); err != nil {
		return err
	}
	saKey, saPub, err := writeServiceAccountKeys(cp.dir)
	if err != nil {
		return err
	}
	cp.adminToken = randomToken()
	kcmToken := randomToken()
	tokens := fmt.Sprintf("%s,admin,admin,\"system:masters\"\n%s,system:kube-controller-manager,kcm,\"system:masters\"\n", cp.adminToken, kcmToken)
	tokenFile := filepath.Join(cp.dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(tokens), 0o600); err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	cp.serverURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	cp.apiserverArgs = []string{
		"--etcd-servers=" + cp.etcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + certFile,
		"--tls-private-key-file=" + keyFile,
		"--client-ca-file=" + caFile,
		"--token-auth-file=" + tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + saPub,
		"--service-account-signing-key-file=" + saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true",
		"--profiling=false",
		"--v=0",
	}
	if cp.opts.Workloads {
		cp.apiserverArgs = append(cp.apiserverArgs, workloadAPIServerArgs...)
	}
	cp.apiserverArgs = append(cp.apiserverArgs, cp.opts.APIServerArgs...)
	if err := cp.run("kube-apiserver", cp.apiserverArgs); err != nil {
		return err
	}
	if err := cp.writeKubeconfig("admin", cp.adminToken, filepath.Join(cp.dir, "kubeconfig")); err != nil {
		return err
	}
	cp.kubeconfig = filepath.Join(cp.dir, "kubeconfig")
	if err := cp.writeKubeconfig("system:kube-controller-manager", kcmToken, filepath.Join(cp.dir, "kcm.kubeconfig")); err != nil {
		return err
	}
	cp.kcmSAKey = saKey
	return cp.waitAPIServerReady(ctx)
}

func (cp *ControlPlane) waitAPIServerReady(ctx context.Context) error {
	client, err := rest.HTTPClientFor(cp.RESTConfig())
	if err != nil {
		return err
	}
	client.Timeout = 5 * time.Second
	return cp.poll(ctx, "kube-apiserver", func() error {
		resp, err := client.Get(cp.serverURL + "/readyz")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("/readyz: %d %s", resp.StatusCode, lastLines(string(body), 3))
		}
		return nil
	})
}

func (cp *ControlPlane) startControllerManager(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	cp.kcmPort = port
	args := []string{
		"--kubeconfig=" + filepath.Join(cp.dir, "kcm.kubeconfig"),
		"--controllers=" + strings.Join(cp.opts.Controllers, ","),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--service-account-private-key-file=" + cp.kcmSAKey,
		"--root-ca-file=" + filepath.Join(cp.dir, "ca.crt"),
		"--use-service-account-credentials=false",
		"--authentication-skip-lookup=true",
		"--v=0",
	}
	if err := cp.run("kube-controller-manager", args); err != nil {
		return err
	}
	return cp.waitHealthz(ctx, "kube-controller-manager", fmt.Sprintf("https://127.0.0.1:%d/healthz", port))
}

func (cp *ControlPlane) writeKubeconfig(user, token, path string) error {
	cfg := clientcmdapi.NewConfig()
	name := cp.opts.Name
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: cp.serverURL, CertificateAuthorityData: cp.caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = name
	return clientcmd.WriteToFile(*cfg, path)
}

// run starts a binary from the bin directory with its output in <dir>/<name>.log and
// env (KEY=VALUE) added to this process's environment.
func (cp *ControlPlane) run(name string, args []string, env ...string) error {
	return cp.runAs(name, name, args, env...)
}

// runAs is run for the binary file under the process name name (its log, LogTail).
func (cp *ControlPlane) runAs(name, file string, args []string, env ...string) error {
	p, err := harnessproc.Start(cp.dir, name, filepath.Join(cp.binDir, file), args, env)
	if err != nil {
		return err
	}
	cp.mu.Lock()
	cp.procs = append(cp.procs, p)
	cp.mu.Unlock()
	return nil
}

func (cp *ControlPlane) exited(name string) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, p := range cp.procs {
		if ended, err := p.Ended(); ended && p.Name() == name {
			return fmt.Errorf("%s exited: %v", name, err)
		}
	}
	return nil
}

// poll calls check every 100 ms until it succeeds, the named process exits or ctx ends.
func (cp *ControlPlane) poll(ctx context.Context, name string, check func() error) error {
	var last error
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		if last = check(); last == nil {
			return nil
		}
		if err := cp.exited(name); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", name, ctx.Err(), last)
		case <-t.C:
		}
	}
}

// logTails returns the last lines of every process log, for error messages.
func (cp *ControlPlane) logTails() string {
	var b strings.Builder
	cp.mu.Lock()
	defer cp.mu.Unlock()
	for _, p := range cp.procs {
		data, err := os.ReadFile(p.LogPath())
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "\n--- last lines of %s ---\n%s", p.LogPath(), lastLines(string(data), 15))
	}
	return b.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func randomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// NewClientOrDie returns a clientset for cfg; it panics only on a malformed cfg.
func NewClientOrDie(cfg *rest.Config) kubernetes.Interface { return kubernetes.NewForConfigOrDie(cfg) }
