// Package faults holds the fault tests of issue #9: the real `configmap-attacher serve`
// process, a real local control plane (etcd, kube-apiserver, kube-controller-manager) and
// an embedded NATS JetStream EventBus, with faults injected while events flow: the service
// SIGKILLed and restarted, NATS restarted, etcd stopped, duplicate/reordered/stale events,
// and a replay flood. Each test is bounded in time and stops everything it started; the
// fleet test over two control planes starts its second one itself.
//
// Writes are counted twice, independently: the apiserver's own apiserver_request_total
// (every PATCH that reached it, even a no-op) and a watch on the test's ConfigMaps that
// counts every change of ownerReferences per object ("written twice" means one object's
// owners changed more than once). Tests in this package never run in parallel, so the
// apiserver counters belong to the test that reads them.
package faults_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.TestMain(m, &cp)) }

// binaryEnv names a prebuilt service binary to test instead of building one.
const binaryEnv = "CONFIGMAP_ATTACHER_FAULTS_BINARY"

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// serviceBinary returns the configmap-attacher binary under test: $CONFIGMAP_ATTACHER_FAULTS_BINARY,
// else one built once per test run from this tree (so the test never runs a stale bin/).
func serviceBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(binaryEnv); p != "" {
		return p
	}
	buildOnce.Do(func() {
		root, err := controlplane.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "cma-faults-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "configmap-attacher")
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/configmap-attacher")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building the service: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return buildPath
}

// bus is an embedded NATS JetStream server with the stream Argo Events' EventBus
// controller creates, and a client publishing to it.
type bus struct {
	srv       *natsserver.Server
	opts      natsserver.Options
	token     string
	tokenFile string
	js        jetstream.JetStream
	closeConn func()
}

// newBus starts NATS with a token and a JetStream store directory that survive a
// restart (see down and up).
func newBus(t *testing.T) *bus {
	t.Helper()
	controlplane.Require(t, cp) // every test here needs the control plane: skip with -short
	port, err := controlplane.FreePort()
	require.NoError(t, err)
	b := &bus{token: "faults-token", opts: natsserver.Options{Token: "faults-token", Port: port, StoreDir: filepath.Join(t.TempDir(), "jetstream")}}
	b.tokenFile = filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(b.tokenFile, []byte(b.token), 0o600))
	require.NoError(t, b.start())
	t.Cleanup(b.stop)
	_, err = b.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "default", Subjects: []string{"default.>"},
		Duplicates: 5 * time.Minute})
	require.NoError(t, err)
	return b
}

func (b *bus) start() error {
	s, err := natsserver.Start(context.Background(), b.opts)
	if err != nil {
		return err
	}
	b.srv = s
	return b.connect()
}

func (b *bus) connect() error {
	nc, err := b.srv.Connect()
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return err
	}
	b.js, b.closeConn = js, nc.Close
	return nil
}

func (b *bus) disconnect() {
	if b.closeConn != nil {
		b.closeConn()
		b.closeConn = nil
	}
}

func (b *bus) stop() {
	b.disconnect()
	b.srv.Stop()
}

// down stops the server as a crash would; up starts it again on the same port with the
// same certificate and JetStream store (natsserver.Server.Shutdown and Restart).
func (b *bus) down() {
	b.disconnect()
	b.srv.Shutdown()
}

func (b *bus) up(t *testing.T) {
	t.Helper()
	require.NoError(t, b.srv.Restart(context.Background()))
	require.NoError(t, b.connect())
}

// consumer returns the service's durable consumer's info.
func (b *bus) consumer(ctx context.Context) (*jetstream.ConsumerInfo, error) {
	c, err := b.js.Consumer(ctx, "default", "configmap-attacher")
	if err != nil {
		return nil, err
	}
	return c.Info(ctx)
}

// idle is nil once the durable consumer has nothing pending and nothing unacked.
func (b *bus) idle() error {
	info, err := b.consumer(context.Background())
	if err != nil {
		return err
	}
	if info.NumPending != 0 || info.NumAckPending != 0 || info.NumRedelivered != 0 {
		return fmt.Errorf("consumer: %d pending, %d unacked, %d redelivering", info.NumPending, info.NumAckPending, info.NumRedelivered)
	}
	return nil
}

// service is one `configmap-attacher serve` process.
type service struct {
	cmd      *exec.Cmd
	done     chan struct{}
	log      string
	httpAddr string
	grpcAddr string
}

// startService starts `serve` with the HTTP receiver and the gRPC trigger on free ports,
// the EventBus subscription when b is set, and extra flags; it waits until /readyz is 200
// and, with a bus, until the durable consumer exists. Cleanup kills it.
func startService(t *testing.T, b *bus, extra ...string) *service {
	t.Helper()
	bin := serviceBinary(t)
	hp, err := controlplane.FreePort()
	require.NoError(t, err)
	gp, err := controlplane.FreePort()
	require.NoError(t, err)
	s := &service{httpAddr: fmt.Sprintf("127.0.0.1:%d", hp), grpcAddr: fmt.Sprintf("127.0.0.1:%d", gp), done: make(chan struct{})}
	args := []string{"serve", "--kubeconfig", cp.Kubeconfig(), "--http-addr", s.httpAddr, "--metrics-addr", "127.0.0.1:0", "--grpc-addr", s.grpcAddr, "--log-level", "info"}
	if b != nil {
		args = append(args, "--eventbus-url", b.srv.ClientURL(), "--eventbus-token-file", b.tokenFile, "--eventbus-tls-ca-file", b.srv.CAFile())
	}
	args = append(args, extra...)
	logFile, err := os.CreateTemp(t.TempDir(), "serve-*.log")
	require.NoError(t, err)
	s.log = logFile.Name()
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, s.cmd.Start())
	go func() { _ = s.cmd.Wait(); logFile.Close(); close(s.done) }()
	t.Cleanup(func() {
		if t.Failed() {
			// Goroutine dump (SIGQUIT) into the log, kept outside the test's temporary
			// directory for a post-mortem.
			_ = s.cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-s.done:
			case <-time.After(10 * time.Second):
			}
			s.kill()
			kept := filepath.Join(os.TempDir(), fmt.Sprintf("cma-faults-%s-%d.log", strings.ReplaceAll(t.Name(), "/", "-"), s.cmd.Process.Pid))
			b, _ := os.ReadFile(s.log)
			if os.WriteFile(kept, b, 0o600) == nil {
				t.Logf("serve log with a goroutine dump kept in %s", kept)
			}
			t.Logf("serve log, without the per-object attach lines and the dump:\n%s", tailText(strings.SplitN(string(b), "SIGQUIT", 2)[0], 60, "msg=attached "))
			return
		}
		s.kill()
	})
	controlplane.Eventually(t, 90*time.Second, "serve to be ready", func() error {
		select {
		case <-s.done:
			t.Fatalf("serve exited: %s", tail(s.log, 30))
		default:
		}
		if code, body := s.get("/readyz"); code != http.StatusOK {
			return fmt.Errorf("/readyz %d %s", code, body)
		}
		if b != nil {
			_, err := b.consumer(context.Background())
			return err
		}
		return nil
	})
	return s
}

// kill SIGKILLs the process (by its own pid) and waits for it.
func (s *service) kill() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

func (s *service) get(path string) (int, string) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + s.httpAddr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var sb strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		sb.WriteString(sc.Text())
		sb.WriteByte('\n')
	}
	return resp.StatusCode, sb.String()
}

// metric returns the sum of the service's /metrics samples of name whose labels include
// every label in match.
func (s *service) metric(name string, match map[string]string) (float64, error) {
	code, body := s.get("/metrics")
	if code != http.StatusOK {
		return 0, fmt.Errorf("/metrics %d", code)
	}
	return sumSamples(body, name, match), nil
}

// rss returns the process's VmRSS and VmHWM (peak) in bytes.
func (s *service) rss() (cur, peak int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			cur = v << 10
		case "VmHWM:":
			peak = v << 10
		}
	}
	return cur, peak
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	return tailText(string(b), n)
}

// tailText returns the last n lines of text, leaving out lines containing any of skip.
func tailText(text string, n int, skip ...string) string {
	var lines []string
next:
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		for _, s := range skip {
			if strings.Contains(line, s) {
				continue next
			}
		}
		lines = append(lines, line)
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var labelRE = regexp.MustCompile(`(\w+)="([^"]*)"`)

// sumSamples sums the Prometheus text samples of name whose labels include match.
func sumSamples(body, name string, match map[string]string) float64 {
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		labels := map[string]string{}
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			for _, m := range labelRE.FindAllStringSubmatch(rest[1:end], -1) {
				labels[m[1]] = m[2]
			}
			rest = rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // another metric with this prefix
		}
		ok := true
		for k, v := range match {
			if labels[k] != v {
				ok = false
			}
		}
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
			sum += v
		}
	}
	return sum
}

// apiRequests reads apiserver_request_total from the apiserver's /metrics.
type apiRequests struct {
	url, token string
	client     *http.Client
}

func newAPIRequests(t *testing.T) *apiRequests { return apiRequestsOf(t, cp) }

// apiRequestsOf reads apiserver_request_total of the control plane plane.
func apiRequestsOf(t *testing.T, plane *controlplane.ControlPlane) *apiRequests {
	t.Helper()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(plane.CAData()))
	return &apiRequests{url: plane.ServerURL() + "/metrics", token: plane.AdminToken(), client: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}}
}

// count returns apiserver_request_total for verb and resource (all codes, or only code
// when it is not empty).
func (a *apiRequests) count(t *testing.T, verb, resource, code string) int {
	t.Helper()
	var n float64
	controlplane.Eventually(t, 60*time.Second, "the apiserver's metrics", func() error {
		req, err := http.NewRequest(http.MethodGet, a.url, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+a.token)
		resp, err := a.client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("apiserver /metrics: %s", resp.Status)
		}
		var sb strings.Builder
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "apiserver_request_total{") {
				sb.WriteString(line)
				sb.WriteByte('\n')
			}
		}
		if err := sc.Err(); err != nil {
			return err
		}
		match := map[string]string{"verb": verb, "resource": resource, "subresource": ""}
		if code != "" {
			match["code"] = code
		}
		n = sumSamplesNoSub(sb.String(), match)
		return nil
	})
	return int(n)
}

// sumSamplesNoSub is sumSamples for apiserver_request_total, treating a missing
// subresource label as "".
func sumSamplesNoSub(body string, match map[string]string) float64 {
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		labels := map[string]string{}
		for _, m := range labelRE.FindAllStringSubmatch(line[:end], -1) {
			labels[m[1]] = m[2]
		}
		ok := true
		for k, v := range match {
			if labels[k] != v {
				ok = false
			}
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64); ok && err == nil {
			sum += v
		}
	}
	return sum
}

// workload is n ReplicaSets rs-i in a new namespace, each using its own opted-in
// ConfigMap cm-i, so that every attach is exactly one write to one object.
type workload struct {
	ns   string
	kc   kubernetes.Interface
	sets []*appsv1.ReplicaSet
	base int // sets[i] is rs-(base+i), using cm-(base+i)
}

func newNamespace(t *testing.T, name string) (string, kubernetes.Interface) {
	t.Helper()
	kc := controlplane.Require(t, cp).Client()
	createNamespace(t, kc, name)
	return name, kc
}

// createNamespace creates namespace name with kc (on any control plane).
func createNamespace(t *testing.T, kc kubernetes.Interface, name string) {
	t.Helper()
	_, err := kc.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func newWorkload(t *testing.T, ns string, n int) *workload {
	t.Helper()
	ns, kc := newNamespace(t, ns)
	w := &workload{ns: ns, kc: kc, sets: make([]*appsv1.ReplicaSet, n)}
	w.each(t, func(ctx context.Context, i int) error { return createConfigMap(ctx, kc, ns, fmt.Sprintf("cm-%d", i)) })
	return w
}

// createSets creates the workload's ReplicaSets, rs-i listing cm-i. Call it once serve
// has started: serve's revision side then saw the ConfigMaps with no ReplicaSet listing
// them and leaves them to the ReplicaSet events under test (it would otherwise attach
// every listed one at start, from the caches; its resync, 10 min, is past any test).
func (w *workload) createSets(t *testing.T) {
	t.Helper()
	w.each(t, func(ctx context.Context, i int) error {
		n := w.base + i
		rs, err := w.kc.AppsV1().ReplicaSets(w.ns).Create(ctx, replicaSet(fmt.Sprintf("rs-%d", n), fmt.Sprintf("cm-%d", n)), metav1.CreateOptions{})
		w.sets[i] = rs
		return err
	})
}

// each runs f for every index of the workload, 16 at a time.
func (w *workload) each(t *testing.T, f func(ctx context.Context, i int) error) {
	t.Helper()
	g, gctx := errgroup.WithContext(context.Background())
	g.SetLimit(16)
	for i := range w.sets {
		g.Go(func() error { return f(gctx, i) })
	}
	require.NoError(t, g.Wait())
}

// createConfigMap creates an unlabelled ConfigMap: the ReplicaSets of these tests list
// theirs by annotation (see createSets for why the revision side leaves them alone).
func createConfigMap(ctx context.Context, kc kubernetes.Interface, ns, name string) error {
	_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
		Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	return err
}

// replicaSet is a ReplicaSet with no replicas whose template uses ConfigMaps cms and
// whose annotation lists them.
func replicaSet(name string, cms ...string) *appsv1.ReplicaSet {
	zero := int32(0)
	labels := map[string]string{"app": name}
	var env []corev1.EnvFromSource
	for _, cm := range cms {
		env = append(env, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}})
	}
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{core.AnnotationConfigMaps: strings.Join(cms, ",")}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "i", EnvFrom: env}}}}}}
}

// ownerWatch watches the ConfigMaps of one namespace and records, per ConfigMap, how many
// times its ownerReferences changed and every owner UID it ever had, and which were deleted.
type ownerWatch struct {
	mu      sync.Mutex
	changes map[string]int
	owners  map[string]map[types.UID]bool
	deleted map[string]bool
}

func watchOwners(t *testing.T, kc kubernetes.Interface, ns string) *ownerWatch {
	t.Helper()
	w := &ownerWatch{changes: map[string]int{}, owners: map[string]map[types.UID]bool{}, deleted: map[string]bool{}}
	f := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().ConfigMaps().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			cm := obj.(*corev1.ConfigMap)
			w.record(cm.Name, false, nil, cm.OwnerReferences)
		},
		UpdateFunc: func(old, obj any) {
			o, cm := old.(*corev1.ConfigMap), obj.(*corev1.ConfigMap)
			w.record(cm.Name, true, o.OwnerReferences, cm.OwnerReferences)
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				w.mu.Lock()
				w.deleted[cm.Name] = true
				w.mu.Unlock()
			}
		},
	})
	require.NoError(t, err)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	f.Start(stop)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced), "ConfigMap watch synced")
	return w
}

func (w *ownerWatch) record(name string, update bool, old, cur []metav1.OwnerReference) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.owners[name] == nil {
		w.owners[name] = map[types.UID]bool{}
	}
	for _, o := range cur {
		w.owners[name][o.UID] = true
	}
	if update && !sameOwners(old, cur) {
		w.changes[name]++
	}
}

func sameOwners(a, b []metav1.OwnerReference) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].UID != b[i].UID {
			return false
		}
	}
	return true
}

// summary returns the number of ConfigMaps whose owners changed once, more than once,
// and the total number of owner changes.
func (w *ownerWatch) summary() (once, twice, total int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, n := range w.changes {
		total += n
		switch {
		case n == 1:
			once++
		case n > 1:
			twice++
		}
	}
	return once, twice, total
}

// twiceWritten lists the ConfigMaps whose owners changed more than once.
func (w *ownerWatch) twiceWritten() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for name, n := range w.changes {
		if n > 1 {
			out = append(out, fmt.Sprintf("%s (%d)", name, n))
		}
	}
	return out
}

func (w *ownerWatch) everOwnedBy(name string, uid types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.owners[name][uid]
}

func (w *ownerWatch) deletions() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.deleted)
}

// attached returns how many of the workload's ReplicaSets own their ConfigMap (read
// live), and an error naming the first few missing.
func (w *workload) attached(ctx context.Context) (int, error) {
	list, err := w.kc.CoreV1().ConfigMaps(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	owned := map[types.UID]bool{}
	for _, cm := range list.Items {
		for _, o := range cm.OwnerReferences {
			owned[o.UID] = true
		}
	}
	n := 0
	var missing []string
	for _, rs := range w.sets {
		if owned[rs.UID] {
			n++
		} else if len(missing) < 5 {
			missing = append(missing, rs.Name)
		}
	}
	if n < len(w.sets) {
		return n, fmt.Errorf("%d of %d attached (missing e.g. %v)", n, len(w.sets), missing)
	}
	return n, nil
}
