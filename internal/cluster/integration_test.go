package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
	"github.com/configmap-attacher/configmap-attacher/trigger"
)

// Two real control planes, a and b, running at once for the package's tests.
var cpA, cpB *controlplane.ControlPlane

func testMain(m *testing.M) int { return controlplane.TestMainTwo(m, &cpA, &cpB) }

func requireClusters(t *testing.T) {
	t.Helper()
	if cpA == nil || cpB == nil {
		t.Skip("integration test: needs two local control planes (not started with -short)")
	}
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("test", t.Name())
	}
	return testfix.Quiet()
}

// mergedKubeconfig writes one kubeconfig with contexts "a" and "b", each with its own
// user, as an operator's kubeconfig for several clusters looks.
func mergedKubeconfig(t *testing.T) string { return controlplane.MergedKubeconfig(t, cpA, cpB) }

// fixture is one ReplicaSet using one opted-in ConfigMap revision in one cluster
// (testfix.ListedFixture).
type fixture struct {
	rs     *appsv1.ReplicaSet
	owners func(t *testing.T) []string
}

func makeFixture(t *testing.T, cp *controlplane.ControlPlane, ns, rsName, cm string) fixture {
	t.Helper()
	rs, owners := testfix.ListedFixture(t, cp, ns, rsName, cm)
	return fixture{rs: rs, owners: owners}
}

// service runs reg and the real trigger service's HTTP receiver in front of it.
type service struct {
	reg  *Registry
	addr string
}

func startService(t *testing.T, opts Options) *service {
	t.Helper()
	opts.Logger = testLogger(t)
	if opts.ProbeInterval == 0 {
		opts.ProbeInterval = 200 * time.Millisecond
	}
	if opts.ProbeTimeout == 0 {
		opts.ProbeTimeout = time.Second
	}
	reg, err := New(opts)
	require.NoError(t, err)
	d, err := dispatch.New(dispatch.Config{Clusters: reg, Logger: opts.Logger})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hs := trigger.NewHTTPServer(d, lis, trigger.HTTPOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	go func() { errs <- reg.Run(ctx) }()
	go func() { errs <- hs.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		for range 2 {
			select {
			case err := <-errs:
				assert.NoError(t, err)
			case <-time.After(30 * time.Second):
				t.Error("registry or HTTP server did not stop")
				return
			}
		}
	})
	controlplane.Eventually(t, 30*time.Second, "the registry to be ready", func() error {
		if ok, report := reg.Readiness(); !ok {
			return errors.New(report)
		}
		return nil
	})
	return &service{reg: reg, addr: lis.Addr().String()}
}

// answer is the HTTP receiver's JSON answer: a dispatch.Response, or an error body.
type answer struct {
	dispatch.Response
	Field string `json:"field,omitempty"`
}

// text is the answer's message and error together.
func (a answer) text() string { return a.Message + " " + a.Error }

// post sends rs as Argo Events resource event data from cluster (metadata.cluster)
// and returns the HTTP status and answer.
func (s *service) post(t *testing.T, cluster string, rs *appsv1.ReplicaSet) (int, answer) {
	t.Helper()
	body, err := json.Marshal(rs)
	require.NoError(t, err)
	data := `{"type":"ADD","group":"apps","version":"v1","resource":"replicasets","metadata":{"cluster":"` + cluster + `"},"body":` + string(body) + `}`
	resp, err := http.Post("http://"+s.addr+"/", "application/json", strings.NewReader(data))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var r answer
	require.NoError(t, json.Unmarshal(b, &r), string(b))
	return resp.StatusCode, r
}

func TestEventsAreRoutedToTheirCluster(t *testing.T) {
	requireClusters(t)
	specs, err := KubeconfigSpecs(mergedKubeconfig(t), []string{"a", "b"}, false, 0, 0)
	require.NoError(t, err)
	s := startService(t, Options{Clusters: specs})

	// The same namespace, ReplicaSet and ConfigMap names in both clusters.
	fa := makeFixture(t, cpA, "routing", "web-1", "cfg-1")
	fb := makeFixture(t, cpB, "routing", "web-1", "cfg-1")
	require.NotEqual(t, fa.rs.UID, fb.rs.UID)

	tests := []struct {
		name             string
		cluster          string
		rs               *appsv1.ReplicaSet
		wantCode         int
		wantMsg          string
		wantField        string
		wantA, wantB     []string
		wantResultTarget string
	}{
		{name: "an event from b changes only b", cluster: "b", rs: fb.rs, wantCode: 200,
			wantA: nil, wantB: []string{string(fb.rs.UID)}, wantResultTarget: "b"},
		{name: "b's ReplicaSet announced as a's is refused (UID differs), nothing changes", cluster: "a", rs: fb.rs, wantCode: 409,
			wantMsg: "UID mismatch", wantA: nil, wantB: []string{string(fb.rs.UID)}},
		{name: "an unknown cluster is a 400 naming the field, nothing changes", cluster: "c", rs: fa.rs, wantCode: 400,
			wantMsg: `unknown cluster "c"`, wantField: "cluster", wantA: nil, wantB: []string{string(fb.rs.UID)}},
		{name: "an event from a changes only a", cluster: "a", rs: fa.rs, wantCode: 200,
			wantA: []string{string(fa.rs.UID)}, wantB: []string{string(fb.rs.UID)}, wantResultTarget: "a"},
		{name: "no cluster means the default (a): already attached", cluster: "", rs: fa.rs, wantCode: 200,
			wantA: []string{string(fa.rs.UID)}, wantB: []string{string(fb.rs.UID)}, wantResultTarget: "a"},
		{name: "replay in b: no second owner", cluster: "b", rs: fb.rs, wantCode: 200,
			wantA: []string{string(fa.rs.UID)}, wantB: []string{string(fb.rs.UID)}, wantResultTarget: "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, resp := s.post(t, tt.cluster, tt.rs)
			assert.Equal(t, tt.wantCode, code, resp.text())
			if tt.wantMsg != "" {
				assert.Contains(t, resp.text(), tt.wantMsg)
			}
			assert.Equal(t, tt.wantField, resp.Field)
			if tt.wantResultTarget != "" {
				assert.Equal(t, tt.wantResultTarget, resp.Cluster)
			}
			assert.Equal(t, tt.wantA, fa.owners(t), "cluster a's cfg-1 owners")
			assert.Equal(t, tt.wantB, fb.owners(t), "cluster b's cfg-1 owners")
		})
	}

	ok, report := s.reg.Readiness()
	assert.True(t, ok)
	assert.Equal(t, "a (default) ok\nb ok\n", report)
}

func TestUnreachableClusterDoesNotBlockTheOthers(t *testing.T) {
	requireClusters(t)
	specs, err := KubeconfigSpecs(mergedKubeconfig(t), nil, true, 0, 0)
	require.NoError(t, err)
	s := startService(t, Options{Clusters: specs})
	ctx := context.Background()

	require.NoError(t, cpB.StopAPIServer())
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			assert.NoError(t, cpB.RestartAPIServer(ctx))
		}
	})
	controlplane.Eventually(t, 15*time.Second, "b to be reported unhealthy", func() error {
		if s.reg.Healthy("b") {
			return errors.New("b still healthy")
		}
		return nil
	})
	var st Status
	for _, x := range s.reg.Statuses() {
		if x.Name == "b" {
			st = x
		}
	}
	assert.False(t, st.Reachable)
	assert.Contains(t, st.Error, "connect", "the status says why b is down")
	ok, report := s.reg.Readiness()
	assert.True(t, ok, "b being down does not make the service unready")
	assert.Contains(t, report, "a (default) ok\n")
	assert.Contains(t, report, "b DOWN: ")

	// a keeps working, promptly, while b is down.
	fa := makeFixture(t, cpA, "fault", "web-2", "cfg-2")
	start := time.Now()
	code, resp := s.post(t, "a", fa.rs)
	assert.Equal(t, 200, code, resp.Message)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, []string{string(fa.rs.UID)}, fa.owners(t))

	// An event for b is a retryable 503 at once, not a hang.
	start = time.Now()
	code, resp = s.post(t, "b", fa.rs)
	assert.Equal(t, http.StatusServiceUnavailable, code, resp.Message)
	assert.Contains(t, resp.text(), `cluster "b"`)
	assert.Less(t, time.Since(start), 2*time.Second)
	_, err = s.reg.Attacher("b")
	assert.ErrorIs(t, err, core.ErrUnavailable)

	// b comes back and is picked up again.
	require.NoError(t, cpB.RestartAPIServer(ctx))
	restarted = true
	controlplane.Eventually(t, 60*time.Second, "b to be healthy again", func() error {
		if !s.reg.Healthy("b") {
			_, r := s.reg.Readiness()
			return errors.New(r)
		}
		return nil
	})
	fb := makeFixture(t, cpB, "fault", "web-2", "cfg-2")
	code, resp = s.post(t, "b", fb.rs)
	assert.Equal(t, 200, code, resp.Message)
	assert.Equal(t, []string{string(fb.rs.UID)}, fb.owners(t))
	assert.Equal(t, []string{string(fa.rs.UID)}, fa.owners(t), "a unchanged")
}

// argoCDSecret is how Argo CD stores cluster b: bearer token and CA data.
func argoCDSecret(name, clusterName string, cp *controlplane.ControlPlane) *corev1.Secret {
	return cp.ArgoCDClusterSecret(name, clusterName)
}

func TestArgoCDClusterSecrets(t *testing.T) {
	requireClusters(t)
	ctx := context.Background()
	kcA := cpA.Client()
	_, err := kcA.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "argocd"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	// The hub is cluster a (the "in-cluster" of the service); b is known only through
	// an Argo CD cluster Secret stored in a.
	home := Spec{Name: "in-cluster", Source: SourceHome, Origin: "test", Config: cpA.RESTConfig()}
	s := startService(t, Options{Clusters: []Spec{home}, ArgoCDNamespace: "argocd"})
	assert.Equal(t, []string{"in-cluster"}, s.reg.Names())

	fb := makeFixture(t, cpB, "argo", "web-3", "cfg-3")
	fa := makeFixture(t, cpA, "argo", "web-3", "cfg-3")
	code, resp := s.post(t, "prod-b", fb.rs)
	assert.Equal(t, 400, code, "prod-b is not registered yet: %s", resp.Message)

	secrets := kcA.CoreV1().Secrets("argocd")
	_, err = secrets.Create(ctx, argoCDSecret("cluster-b", "prod-b", cpB), metav1.CreateOptions{})
	require.NoError(t, err)
	controlplane.Eventually(t, 30*time.Second, "prod-b to be registered and healthy", func() error {
		if !s.reg.Healthy("prod-b") {
			_, r := s.reg.Readiness()
			return errors.New(r)
		}
		return nil
	})
	code, resp = s.post(t, "prod-b", fb.rs)
	assert.Equal(t, 200, code, resp.Message)
	assert.Equal(t, "prod-b", resp.Cluster)
	assert.Equal(t, []string{string(fb.rs.UID)}, fb.owners(t), "b changed")
	assert.Nil(t, fa.owners(t), "a unchanged")

	// An invalid Secret is reported, not registered, and breaks nothing.
	bad := argoCDSecret("broken", "broken", cpB)
	bad.StringData["config"] = `{"bearerToken":`
	_, err = secrets.Create(ctx, bad, metav1.CreateOptions{})
	require.NoError(t, err)
	// A Secret claiming a name already taken is reported as a conflict.
	dup := argoCDSecret("dup", "in-cluster", cpB)
	_, err = secrets.Create(ctx, dup, metav1.CreateOptions{})
	require.NoError(t, err)
	controlplane.Eventually(t, 15*time.Second, "the bad Secrets to be reported", func() error {
		found := map[string]string{}
		for _, st := range s.reg.Statuses() {
			if !st.Registered {
				found[st.Origin] = st.Error
			}
		}
		if !strings.Contains(found["Argo CD Secret argocd/broken"], `"config" is not valid`) ||
			!strings.Contains(found["Argo CD Secret argocd/dup"], "already registered") {
			return fmt.Errorf("unregistered: %v", found)
		}
		return nil
	})
	assert.Equal(t, []string{"in-cluster", "prod-b"}, s.reg.Names())
	assert.True(t, s.reg.Ready())

	// Renaming the cluster in the Secret moves it: the old name is unknown at once.
	cur, err := secrets.Get(ctx, "cluster-b", metav1.GetOptions{})
	require.NoError(t, err)
	cur.Data["name"] = []byte("prod-b2")
	_, err = secrets.Update(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	controlplane.Eventually(t, 30*time.Second, "the rename", func() error {
		if got := s.reg.Names(); fmt.Sprint(got) != "[in-cluster prod-b2]" {
			return fmt.Errorf("clusters %v", got)
		}
		return nil
	})
	code, _ = s.post(t, "prod-b", fb.rs)
	assert.Equal(t, 400, code)
	controlplane.Eventually(t, 30*time.Second, "prod-b2 healthy", func() error {
		if !s.reg.Healthy("prod-b2") {
			return errors.New("not yet")
		}
		return nil
	})
	code, resp = s.post(t, "prod-b2", fb.rs)
	assert.Equal(t, 200, code, resp.Message)
	assert.Equal(t, core.OutcomeAlreadyAttached, resp.Objects[0].Outcome)

	// Deleting the Secret unregisters the cluster.
	require.NoError(t, secrets.Delete(ctx, "cluster-b", metav1.DeleteOptions{}))
	controlplane.Eventually(t, 30*time.Second, "prod-b2 to be unregistered", func() error {
		_, err := s.reg.Attacher("prod-b2")
		var fe *core.FieldError
		if !errors.As(err, &fe) || fe.Field != "cluster" {
			return fmt.Errorf("Attacher(prod-b2) = %v", err)
		}
		return nil
	})
	code, resp = s.post(t, "prod-b2", fb.rs)
	assert.Equal(t, 400, code, resp.Message)
	assert.Contains(t, resp.text(), `unknown cluster "prod-b2"`)
	assert.Equal(t, "cluster", resp.Field)
	assert.Equal(t, []string{"in-cluster"}, s.reg.Names())
}
