package argocd_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argocd"
)

// TestOptingIntoControllerOnlyOwnerReferencesIsReportedAsNotProtected: a revision, or
// its Application, that opts into controller-only owner references (the proposals of
// argo-cd #24814, per object, and #26669, per Application; neither released) is
// reported as "not protected from pruning" when the service attaches it: a Warning
// Event on the revision and on its ReplicaSet, the metric, a `status` line with the
// fix. Today's Argo CD ignores the option, so the revision dropped from Git is still
// kept while its ReplicaSet owns it.
func TestOptingIntoControllerOnlyOwnerReferencesIsReportedAsNotProtected(t *testing.T) {
	for _, tc := range []struct {
		name, short string
		annotations []string
		app         argocd.App
		fix         string
	}{
		{name: "the revision's sync option ControllerReferencesOnly=true", short: "cro-object",
			annotations: []string{core.ArgoCDSyncOptions + ": ControllerReferencesOnly=true"}, fix: core.FixControllerReferencesOnly},
		{name: "the Application's sync option", short: "cro-app",
			app: argocd.App{SyncOptions: []string{"ControllerReferencesOnly=true"}}, fix: core.FixAppOwnerProtectionOff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, tc.short)
			srv := w.ServeWatcher()
			sha := w.commit("config version 1", webFiles("web", 1, tc.annotations...))
			app := tc.app
			app.Path = "web"
			w.createApp(app)
			w.waitHealthy(sha)
			cm, rs := w.current("web")
			w.waitOwned(cm, rs)

			w.Eventually("a Warning Event on the revision and on its ReplicaSet", func() error {
				n, m := warnings(w, cm, core.ReasonNotProtectedFromPruning), warnings(w, rs.Name, core.ReasonNotProtectedFromPruning)
				if n == 0 || m == 0 {
					return fmt.Errorf("%d on ConfigMap %s, %d on ReplicaSet %s", n, cm, m, rs.Name)
				}
				return nil
			})
			series := `configmap_attacher_unprotected_revisions_total{cluster="in-cluster",reason="` + core.ReasonNotProtectedFromPruning + `"}`
			if v := metricValue(t, srv, series); v == "" || v == "0" {
				t.Fatalf("%s = %q, want at least 1", series, v)
			}
			out := statusOf(t, w)
			for _, want := range []string{"ConfigMap " + cm + "  " + core.ReasonNotProtectedFromPruning, "fix: " + tc.fix} {
				if !strings.Contains(out, want) {
					t.Fatalf("status has no %q:\n%s", want, out)
				}
			}

			// Argo CD v3.6 ignores the option: the revision dropped by the next commit is kept.
			sha = w.commit("config version 2", webFiles("web", 2, tc.annotations...))
			w.waitHealthy(sha)
			w.mustBeOwned(cm, rs)
		})
	}
}

func warnings(w *world, name, reason string) int {
	w.T.Helper()
	list, err := w.Kube.CoreV1().Events(w.NS).List(w.Ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + name + ",reason=" + reason + ",type=Warning"})
	if err != nil {
		w.T.Fatal(err)
	}
	return len(list.Items)
}

// metricValue is the value of one series on the service's /metrics, "" when absent.
func metricValue(t *testing.T, srv *server.Server, series string) string {
	t.Helper()
	resp, err := http.Get("http://" + srv.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return ""
}

// statusOf runs `configmap-attacher status` on the scenario's namespace.
func statusOf(t *testing.T, w *world) string {
	t.Helper()
	var out, errOut bytes.Buffer
	args := []string{"status", "--kubeconfig", cp.Kubeconfig(), "-n", w.NS}
	if code := cli.Main(w.Ctx, args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut}); code != 0 {
		t.Fatalf("status exited %d: %s", code, errOut.String())
	}
	return out.String()
}
