package clusters_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/argoproj/argo-events/pkg/sensors/triggers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// pluginScript writes an executable shell script and returns its path.
func pluginScript(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755))
	return p
}

// execClusterSecret is an Argo CD cluster Secret for server whose credentials come from
// the credential plugin command (args as given).
func execClusterSecret(ns, name, clusterName, server, command string, args ...string) *corev1.Secret {
	cfg, _ := json.Marshal(map[string]any{"tlsClientConfig": map[string]any{"insecure": true},
		"execProviderConfig": map[string]any{"command": command, "args": args, "apiVersion": "client.authentication.k8s.io/v1beta1"}})
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Labels: map[string]string{cluster.ArgoCDSecretTypeLabel: cluster.ArgoCDSecretTypeCluster}},
		StringData: map[string]string{"name": clusterName, "server": server, "config": string(cfg)}}
}

// statusOf returns the registry's status of the Secret origin ("ns/name").
func statusOf(s *breakServe, secret string) (cluster.Status, bool) {
	for _, st := range s.srv.Clusters().Statuses() {
		if st.Origin == "Argo CD Secret "+secret {
			return st, true
		}
	}
	return cluster.Status{}, false
}

// metricLine returns the first /metrics line starting with prefix ("" if none).
func (s *breakServe) metricLine(prefix string) string {
	_, body := s.get("/metrics")
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// postEvent sends rs's ADD as Argo Events resource event data from clusterName and
// returns the HTTP status and body.
func (s *breakServe) postEvent(t *testing.T, clusterName string, rs *appsv1.ReplicaSet) (int, string) {
	t.Helper()
	b, err := json.Marshal(rs)
	require.NoError(t, err)
	data := `{"type":"ADD","group":"apps","version":"v1","resource":"replicasets","metadata":{"cluster":"` + clusterName + `"},"body":` + string(b) + `}`
	resp, err := authClient.Post("http://"+s.addr+"/", "application/json", strings.NewReader(data))
	require.NoError(t, err)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// executeGRPC sends rs's ADD to the gRPC custom trigger for clusterName and returns
// its status code.
func (s *breakServe) executeGRPC(t *testing.T, clusterName string, rs *appsv1.ReplicaSet) codes.Code {
	t.Helper()
	conn, err := grpc.NewClient(s.srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	b, err := json.Marshal(rs)
	require.NoError(t, err)
	payload := `{"type":"ADD","group":"apps","version":"v1","resource":"replicasets","body":` + string(b) + `}`
	_, err = triggers.NewTriggerClient(conn).Execute(context.Background(),
		&triggers.ExecuteRequest{Resource: []byte("cluster: " + clusterName + "\n"), Payload: []byte(payload)})
	return status.Code(err)
}

// TestClusterSecretCannotRunACommandTheOperatorDidNotAllow (rule 12): a labelled
// Secret naming a credential plugin is refused with a per-Secret error and a metric,
// and the command never runs; with the plugin allowed it runs, and its token is used.
func TestClusterSecretCannotRunACommandTheOperatorDidNotAllow(t *testing.T) {
	a, b := newRun(t)
	argocd := namespace(t, a, "trust-exec-argocd")
	marker := filepath.Join(t.TempDir(), "ran")
	evil := pluginScript(t, "evil", "touch "+marker+"\nexit 1\n")
	token := pluginScript(t, "token-plugin", `echo '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"`+b.AdminToken()+`"}}'`+"\n")
	allowed, err := cluster.NewExecPolicy([]string{token}, 0, "")
	require.NoError(t, err)

	opts := hubOptions(a, argocd)
	opts.ExecPlugins = allowed
	s := startBreakServe(t, opts, server.Ingress{})
	createSecret(t, a, execClusterSecret(argocd, "evil", "evil", b.ServerURL(), evil, "attach", "--configmaps", "victim"))
	controlplane.Eventually(t, 30*time.Second, "the Secret refused", func() error {
		st, ok := statusOf(s, argocd+"/evil")
		if !ok || st.Registered || st.Reason != cluster.ReasonExecNotAllowed {
			return fmt.Errorf("status %+v", st)
		}
		if !strings.Contains(st.Error, "credential plugin not allowed") || !strings.Contains(st.Error, evil) {
			return fmt.Errorf("error %q", st.Error)
		}
		return nil
	})
	assert.Contains(t, s.metricLine(`configmap_attacher_cluster_secret_refused{`), `reason="exec-not-allowed"`)
	assert.Contains(t, s.metricLine(`configmap_attacher_cluster_secret_refused{`), `secret="`+argocd+`/evil"`)
	code, body := s.gcDryRun(t, "evil", "default")
	assert.Equal(t, http.StatusBadRequest, code, "evil is no cluster: %s", body)

	// The allowed plugin gives the cluster its credentials.
	createSecret(t, a, execClusterSecret(argocd, "good", "good", b.ServerURL(), token))
	controlplane.Eventually(t, 30*time.Second, "good served through its plugin's token", func() error {
		if !s.srv.Clusters().Healthy("good") {
			st, _ := statusOf(s, argocd+"/good")
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	_, err = os.Stat(marker)
	assert.True(t, os.IsNotExist(err), "the command not allowed never ran")
}

// hangingPlugin writes its pid and its child's into the file $1, then hangs.
const hangingPlugin = `echo $$ >> "$1"
sleep 300 &
echo $! >> "$1"
wait
`

func readPids(t *testing.T, file string) []int {
	t.Helper()
	b, _ := os.ReadFile(file)
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(f)
		require.NoError(t, err)
		out = append(out, n)
	}
	return out
}

func processRuns(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

// TestHungCredentialPluginStallsNoOtherCluster (rule 13): a cluster whose allowed
// credential plugin hangs is marked down within the probe interval and answered
// retry-later at once; meanwhile a healthy cluster's event (HTTP) and new ReplicaSet
// (watcher) are attached promptly; removing the Secret kills the plugin and its child;
// serve stops within its shutdown timeout.
func TestHungCredentialPluginStallsNoOtherCluster(t *testing.T) {
	a, b := newRun(t)
	ctx := context.Background()
	ns, argocd := namespace(t, b, "trust-hung"), namespace(t, a, "trust-hung-argocd")
	plugin := pluginScript(t, "hang", hangingPlugin)
	pidFile := filepath.Join(t.TempDir(), "pids")
	allowed, err := cluster.NewExecPolicy([]string{plugin}, 10*time.Minute, "")
	require.NoError(t, err)
	opts := hubOptions(a, argocd)
	opts.ExecPlugins, opts.ProbeInterval, opts.ProbeTimeout = allowed, time.Second, time.Second
	s := startBreakServe(t, opts, server.Ingress{Watch: true, WatchResync: time.Hour})
	secrets := a.Client().CoreV1().Secrets(argocd)
	good := clusterSecret(b, argocd, "good", "good")
	createSecret(t, a, good)
	// The same apiserver through a loopback proxy: another address, not a duplicate
	// server (two Secrets for b's address would be refused, duplicate-server).
	hungURL := "https://" + testfix.NewCutProxy(t, strings.TrimPrefix(b.ServerURL(), "https://")).Addr()
	createSecret(t, a, execClusterSecret(argocd, "hung", "hung", hungURL, plugin, pidFile))

	start := time.Now()
	controlplane.Eventually(t, 30*time.Second, "hung marked down", func() error {
		if st, ok := statusOf(s, argocd+"/hung"); !ok || !st.Registered || st.Reachable || !strings.Contains(st.Error, "credential") {
			return fmt.Errorf("status %+v", st)
		}
		return nil
	})
	t.Logf("hung marked down %s after its Secret was created", time.Since(start).Round(time.Millisecond))
	require.Len(t, readPids(t, pidFile), 2, "the plugin runs once (and hangs), not once per request")

	// Events for hung while it hangs: answered retry-later at once, all of them.
	rs := &appsv1.ReplicaSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "any", Namespace: ns, UID: "00000000-0000-0000-0000-000000000001"}}
	var wg sync.WaitGroup
	answers := make([]int, 40)
	for i := range answers {
		wg.Add(1)
		go func() { defer wg.Done(); answers[i], _ = s.postEvent(t, "hung", rs) }()
	}
	wg.Wait()
	for _, c := range answers {
		assert.Equal(t, http.StatusServiceUnavailable, c)
	}
	assert.Equal(t, codes.Unavailable, s.executeGRPC(t, "hung", rs), "gRPC: retry-later at once")

	// The healthy cluster meanwhile: an event (HTTP) and its watcher.
	controlplane.Eventually(t, 60*time.Second, "good healthy", func() error {
		if !s.srv.Clusters().Healthy("good") {
			return errors.New("not yet")
		}
		return nil
	})
	rsB, owners := testfix.ListedFixture(t, b, ns, "web", "cfg-web")
	began := time.Now()
	controlplane.Eventually(t, 30*time.Second, "good's ReplicaSet attached by its watcher", func() error {
		if o := owners(t); !slices.Equal(o, []string{string(rsB.UID)}) {
			return fmt.Errorf("owners %v", o)
		}
		return nil
	})
	watched := time.Since(began)
	began = time.Now()
	code, body := s.postEvent(t, "good", rsB)
	posted := time.Since(began)
	assert.Equal(t, http.StatusOK, code, body)
	began = time.Now()
	assert.Equal(t, codes.OK, s.executeGRPC(t, "good", rsB))
	viaGRPC := time.Since(began)
	t.Logf("while hung hangs: good's ReplicaSet attached by the watcher in %s, an HTTP event answered in %s, a gRPC one in %s",
		watched.Round(time.Millisecond), posted.Round(time.Millisecond), viaGRPC.Round(time.Millisecond))
	assert.Less(t, posted, 10*time.Second, "not held behind the hung cluster")
	assert.Less(t, viaGRPC, 10*time.Second, "not held behind the hung cluster")

	// Removing the Secret kills the plugin and its child.
	pids := readPids(t, pidFile)
	require.NoError(t, secrets.Delete(ctx, "hung", metav1.DeleteOptions{}))
	controlplane.Eventually(t, 30*time.Second, "the plugin and its child gone with the cluster", func() error {
		for _, p := range pids {
			if processRuns(p) {
				return fmt.Errorf("pid %d still runs", p)
			}
		}
		return nil
	})

	// Shutdown while another hung plugin runs ends within the shutdown timeout (5s).
	createSecret(t, a, execClusterSecret(argocd, "hung2", "hung2", hungURL, plugin, pidFile))
	controlplane.Eventually(t, 30*time.Second, "hung2's plugin runs", func() error {
		if len(readPids(t, pidFile)) < 4 {
			return errors.New("not yet")
		}
		return nil
	})
	// Connections the test's client dialled but never used stay "new" on the server,
	// which waits 5 s for them (net/http): not what is measured here.
	authClient.CloseIdleConnections()
	began = time.Now()
	s.stop(t)
	t.Logf("serve stopped in %s with a plugin hanging", time.Since(began).Round(time.Millisecond))
	assert.Less(t, time.Since(began), 15*time.Second)
	for _, p := range readPids(t, pidFile)[2:] {
		assert.False(t, processRuns(p), "pid %d outlived serve", p)
	}
}

// TestTwoSecretsNamingOneClusterServeNeither (rule 12): two Argo CD Secrets with one
// cluster name: neither serves it (a Warning Event on each, a metric naming the other),
// the same after a restart; once one goes, the other serves. Two names for one server
// are refused the same way.
func TestTwoSecretsNamingOneClusterServeNeither(t *testing.T) {
	a, b := newRun(t)
	ctx := context.Background()
	argocd := namespace(t, a, "trust-dup-argocd")
	secrets := a.Client().CoreV1().Secrets(argocd)
	opts := hubOptions(a, argocd)
	// Two Secrets for member-b, through two host names of b's apiserver; "aa-shadow"
	// sorts first.
	real := clusterSecret(b, argocd, "member-b", "member-b")
	shadow := clusterSecret(b, argocd, "aa-shadow", "member-b")
	shadow.StringData["server"] = strings.Replace(b.ServerURL(), "127.0.0.1", "localhost", 1)
	for _, sec := range []*corev1.Secret{real, shadow} {
		createSecret(t, a, sec)
	}
	neither := func(s *breakServe) {
		t.Helper()
		controlplane.Eventually(t, 30*time.Second, "both refused as duplicates", func() error {
			for _, k := range []string{"member-b", "aa-shadow"} {
				st, ok := statusOf(s, argocd+"/"+k)
				if !ok || st.Registered || st.Reason != cluster.ReasonDuplicateName || len(st.Conflicts) != 1 {
					return fmt.Errorf("%s: %+v", k, st)
				}
			}
			return nil
		})
		for range 5 { // never served, not even for a moment
			assert.NotContains(t, s.srv.Clusters().Names(), "member-b")
			time.Sleep(100 * time.Millisecond)
		}
		line := s.metricLine(`configmap_attacher_cluster_secret_refused{cluster="member-b",conflicts="` + argocd + `/member-b"`)
		assert.Contains(t, line, `secret="`+argocd+`/aa-shadow"`)
	}
	s := startBreakServe(t, opts, server.Ingress{})
	neither(s)
	controlplane.Eventually(t, 30*time.Second, "a Warning Event on each Secret", func() error {
		evs, err := a.Client().CoreV1().Events(argocd).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		on := map[string]bool{}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == "ClusterSecretRefused" && e.InvolvedObject.Kind == "Secret" {
				on[e.InvolvedObject.Name] = true
			}
		}
		if !on["member-b"] || !on["aa-shadow"] {
			return fmt.Errorf("Warning Events on %v", on)
		}
		return nil
	})
	s.stop(t)

	s = startBreakServe(t, opts, server.Ingress{})
	neither(s)
	require.NoError(t, secrets.Delete(ctx, "aa-shadow", metav1.DeleteOptions{}))
	controlplane.Eventually(t, 30*time.Second, "member-b served by the Secret left", func() error {
		if !s.srv.Clusters().Healthy("member-b") {
			return errors.New("not yet")
		}
		c, err := s.srv.Clusters().Cluster("member-b")
		if err != nil || c.Spec.Origin != "Argo CD Secret "+argocd+"/member-b" {
			return fmt.Errorf("member-b: %v %v", c, err)
		}
		return nil
	})

	// One server under a second name: both refused, the first stops being served.
	alias := clusterSecret(b, argocd, "alias", "member-b-alias")
	createSecret(t, a, alias)
	controlplane.Eventually(t, 30*time.Second, "one server under two names refused", func() error {
		st, _ := statusOf(s, argocd+"/alias")
		if st.Reason != cluster.ReasonDuplicateServer || slices.Contains(s.srv.Clusters().Names(), "member-b") {
			return fmt.Errorf("alias %+v; clusters %v", st, s.srv.Clusters().Names())
		}
		return nil
	})
}

// TestClusterSecretNamespacesLimitEventsAndSweeps (rule 12): a cluster Secret's
// "namespaces" is that cluster's namespace policy: an event or an `operation: gc` for
// another namespace of the cluster is refused, and nothing there changes.
func TestClusterSecretNamespacesLimitEventsAndSweeps(t *testing.T) {
	a, b := newRun(t)
	inside, outside, argocd := namespace(t, b, "trust-ns-in"), namespace(t, b, "trust-ns-out"), namespace(t, a, "trust-ns-argocd")
	s := startBreakServe(t, hubOptions(a, argocd), server.Ingress{GC: &server.GCOptions{Options: gc.Options{MinAge: time.Nanosecond}}})
	limited := clusterSecret(b, argocd, "limited", "limited")
	limited.StringData["namespaces"] = inside
	createSecret(t, a, limited)
	controlplane.Eventually(t, 30*time.Second, "limited served", func() error {
		if code, body := s.gcDryRun(t, "limited", inside); code != http.StatusOK {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	})
	orphan(t, b, outside, "orphan-outside")
	rsOut, owners := testfix.ListedFixture(t, b, outside, "web", "cfg-web")

	code, body := s.postEvent(t, "limited", rsOut)
	assert.Equal(t, http.StatusConflict, code, body)
	assert.Contains(t, body, "not among the namespaces of cluster limited")
	assert.Empty(t, owners(t), "nothing attached outside the Secret's namespaces")

	q := url.Values{"operation": {"gc"}, "cluster": {"limited"}, "namespace": {outside}}
	resp, err := authClient.Post("http://"+s.addr+"/?"+q.Encode(), "application/json",
		strings.NewReader(`{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"any","namespace":"`+outside+`"}}`))
	require.NoError(t, err)
	gcBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusConflict, resp.StatusCode, string(gcBody))
	assert.True(t, exists(t, b, outside, "orphan-outside"), "no sweep outside the Secret's namespaces")
}

// TestClustersBeyondTheCapAreRefused: with --max-clusters 2 (the hub and one), a second
// Argo CD Secret is refused with reason cluster-cap and served once room is made.
func TestClustersBeyondTheCapAreRefused(t *testing.T) {
	a, b := newRun(t)
	ctx := context.Background()
	argocd := namespace(t, a, "trust-cap-argocd")
	opts := hubOptions(a, argocd)
	opts.MaxClusters = 2
	s := startBreakServe(t, opts, server.Ingress{})
	secrets := a.Client().CoreV1().Secrets(argocd)
	first := clusterSecret(b, argocd, "first", "first")
	createSecret(t, a, first)
	controlplane.Eventually(t, 30*time.Second, "first served", func() error {
		if !s.srv.Clusters().Healthy("first") {
			return errors.New("not yet")
		}
		return nil
	})
	second := clusterSecret(b, argocd, "a-second", "second") // sorts first: the cap keeps "first"
	second.StringData["server"] = "https://" + testfix.NewCutProxy(t, strings.TrimPrefix(b.ServerURL(), "https://")).Addr()
	createSecret(t, a, second)
	controlplane.Eventually(t, 30*time.Second, "second refused by the cap", func() error {
		st, _ := statusOf(s, argocd+"/a-second")
		if st.Reason != cluster.ReasonCap || !strings.Contains(st.Error, "--max-clusters=2") {
			return fmt.Errorf("%+v", st)
		}
		return nil
	})
	assert.True(t, s.srv.Clusters().Healthy("first"), "the cluster served keeps its place")
	require.NoError(t, secrets.Delete(ctx, "first", metav1.DeleteOptions{}))
	controlplane.Eventually(t, 30*time.Second, "second served once there is room", func() error {
		if !s.srv.Clusters().Healthy("second") {
			return errors.New("not yet")
		}
		return nil
	})
}
