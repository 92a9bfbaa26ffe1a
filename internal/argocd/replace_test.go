package argocd_test

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/argocd"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
)

// TestReplaceSyncDropsOwnersAndTheServiceRestoresThem: under ServerSideApply and
// server-side diff, a commit that puts Replace=true on the revisions makes Argo CD sync
// the attached revision with a PUT, which drops its ownerReferences; the service's
// revision side restores them and says so (an Attached Event, the attached counter).
func TestReplaceSyncDropsOwnersAndTheServiceRestoresThem(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "replace")
	srv := w.ServeWatcher()
	sha := w.commit("config version 1", webFiles("web", 1))
	w.createApp(argocd.App{Path: "web", SyncOptions: []string{"ServerSideApply=true"}, ServerSideDiff: true})
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
}

// attachedEvents counts the Attached Events (sum of their counts) on ConfigMap name.
func (w *world) attachedEvents(name string) int {
	w.T.Helper()
	list, err := w.Kube.CoreV1().Events(w.NS).List(w.Ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=ConfigMap,involvedObject.name=" + name + ",reason=Attached"})
	if err != nil {
		w.T.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		n += max(int(e.Count), 1)
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
