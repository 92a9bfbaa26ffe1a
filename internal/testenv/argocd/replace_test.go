package argocd_test

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argocd"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// TestReplaceSyncDropsOwnersAndTheServiceRestoresThem: under client-side apply and diff,
// and under ServerSideApply with server-side diff, a commit that puts Replace=true on
// the revisions makes Argo CD sync the attached revision with a PUT, which drops its
// ownerReferences; the service's revision side restores them and says so (an Attached
// Event, the attached counter), and the restored owners are no diff that would make
// selfHeal replace the revision again.
func TestReplaceSyncDropsOwnersAndTheServiceRestoresThem(t *testing.T) {
	for _, tc := range applyModes {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			replaceSync(t, newWorld(t, "replace-"+tc.name[:6]), tc.app)
		})
	}
}

func replaceSync(t *testing.T, w *world, app argocd.App) {
	srv := w.ServeWatcher()
	sha := w.commit("config version 1", webFiles("web", 1))
	app.Path = "web"
	w.createApp(app)
	w.waitHealthy(sha)
	cm, rs := w.current("web")
	w.waitOwned(cm, rs)
	before := attachedCount(t, srv)
	events := w.attachedEvents(cm)

	sha = w.commit("revisions replaced on sync", webFiles("web", 1, `argocd.argoproj.io/sync-options: Replace=true`))
	w.waitHealthy(sha)
	if now, _ := w.current("web"); now != cm {
		t.Fatalf("the annotation changed the generated name: %s -> %s", cm, now)
	}
	w.Eventually("the PUT seen dropping the ownerReferences", func() error {
		if n := w.rec.droppedOwners(cm); n == 0 {
			return fmt.Errorf("revision %s never seen without owners", cm)
		}
		return nil
	})
	w.waitOwned(cm, rs)
	w.Eventually("an Attached Event for the restored owner", func() error {
		if n := w.attachedEvents(cm); n <= events {
			return fmt.Errorf("%d Attached Events, %d before the replace", n, events)
		}
		return nil
	})
	if after := attachedCount(t, srv); after <= before {
		t.Fatalf("configmap_attacher_objects_total{outcome=attached} is %v, %v before the replace", after, before)
	}
	w.waitHealthy(sha)
	// Another refresh and reconciliation: the restored owners are no diff, nothing is
	// replaced again.
	drops := w.rec.droppedOwners(cm)
	if err := acd.Refresh(w.Ctx, w.app); err != nil {
		t.Fatal(err)
	}
	w.waitRefreshed()
	w.waitHealthy(sha)
	if n := w.rec.droppedOwners(cm); n != drops {
		t.Fatalf("revision %s lost its owners %d times, %d before the refresh", cm, n, drops)
	}
	w.waitOwned(cm, rs)
}

// attachedEvents counts the Attached Events (sum of their counts) on ConfigMap name.
func (w *world) attachedEvents(name string) int {
	w.T.Helper()
	n, err := testfix.AttachedEvents(w.Ctx, w.Kube, w.NS, name)
	if err != nil {
		w.T.Fatal(err)
	}
	return n
}

// attachedCount is configmap_attacher_objects_total{outcome="attached"} on the service.
func attachedCount(t *testing.T, srv *server.Server) float64 {
	t.Helper()
	resp, err := http.Get("http://" + srv.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "configmap_attacher_objects_total{") && strings.Contains(line, `outcome="attached"`) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			sum += v
		}
	}
	return sum
}

// waitRefreshed waits until the controller has taken the refresh asked for (it removes
// the refresh annotation once it has compared the app again).
func (w *world) waitRefreshed() {
	w.T.Helper()
	w.Eventually("the refresh of "+w.app+" done", func() error {
		app, err := acd.Get(w.Ctx, w.app)
		if err != nil {
			return err
		}
		if v, ok := app.GetAnnotations()["argocd.argoproj.io/refresh"]; ok {
			return fmt.Errorf("refresh %q pending", v)
		}
		return nil
	})
}
