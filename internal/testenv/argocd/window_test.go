package argocd_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argocd"
)

// TestACommitRightAfterTheReplicaSetDoesNotPruneItsRevision measures the window before
// the attach against how soon Argo CD can prune: the moment the ReplicaSet of a new
// revision appears, the next commit (which drops that revision from Git) is pushed and
// Argo CD refreshed. The sync of that commit prunes with prune=true, and the revision
// must survive it, owned by its ReplicaSet. The figures (ReplicaSet created -> revision
// owned, ReplicaSet created -> the pruning sync started) are reported.
//
// The revision is created by the sync before its ReplicaSet, so under every way in its
// first use is attached from the service's own ReplicaSet cache (the revision side,
// docs/design.md "First use"), not when the way in's event arrives: a Sensor's first
// event after it starts waits 1-2 s for its custom-trigger client, and on a quick Argo CD
// the pruning sync was seen 0.7 s after the ReplicaSet. The first revision's figure is
// reported as "first event after the way in started".
func TestACommitRightAfterTheReplicaSetDoesNotPruneItsRevision(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(*world)
	}{
		{"watcher", func(w *world) { w.ServeWatcher() }},
		{"argo-events-grpc", func(w *world) { w.ServeArgoSensor(server.Options{}, nil) }},
		{"eventbus", func(w *world) { w.ServeArgoEventBus() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, "window-"+tc.name)
			tc.serve(w)
			commitRightAfterTheReplicaSet(w)
		})
	}
}

func commitRightAfterTheReplicaSet(w *world) {
	t := w.T
	// The third commit follows the second ReplicaSet at once: with revisionHistoryLimit 1
	// the Rollouts controller deletes one of the two older ReplicaSets, oldest first with
	// ties (one creation second) broken by name, so it may be the second (and the garbage
	// collector its revision, rightly) before the check. Two kept revisions keep both,
	// so what is checked is Argo CD's prune alone.
	files := func(v int) map[string]string { return withHistoryLimit(webFiles("web", v), 2) }
	sha := w.commit("config version 1", files(1))
	w.createApp(argocd.App{Path: "web"})
	w.waitHealthy(sha)
	r1, rs1 := w.current("web")
	w.waitOwned(r1, rs1)
	rs1Created, _ := w.rec.at("ReplicaSet", rs1.Name)
	report(t.Name()+": first event after the way in started: ReplicaSet created -> revision owned", "%s",
		w.ownedAt(r1).Sub(rs1Created).Round(ms))

	w.commit("config version 2", files(2))
	rs2 := w.newReplicaSet(rs1)
	sha3 := w.commit("config version 3", files(3))
	committed := time.Now()
	var syncStart, syncSeen time.Time
	w.Eventually("the sync of commit 3 started", func() error {
		st, err := w.status()
		if err != nil {
			return err
		}
		if st.OpRevision != sha3 {
			return fmt.Errorf("last operation at %.8s", st.OpRevision)
		}
		syncStart, syncSeen = st.OpStarted, time.Now()
		return nil
	})
	st := w.waitHealthy(sha3)
	for _, p := range st.Pruned {
		if strings.HasPrefix(p, "ConfigMap/") {
			t.Fatalf("the sync of commit 3 pruned %s", p)
		}
	}
	r2 := rs2.Spec.Template.Spec.Volumes[0].ConfigMap.Name
	w.mustBeOwned(r2, rs2)
	rsCreated, _ := w.rec.at("ReplicaSet", rs2.Name)
	owned := w.ownedAt(r2)
	report(t.Name()+": ReplicaSet created -> revision owned", "%s", owned.Sub(rsCreated).Round(ms))
	report(t.Name()+": ReplicaSet created -> pruning sync seen", "%s (commit pushed after %s; operation startedAt %s after it, second precision)",
		syncSeen.Sub(rsCreated).Round(ms), committed.Sub(rsCreated).Round(ms), syncStart.Sub(rsCreated.Truncate(time.Second)))
}

// ownedAt is when the recorder first saw ConfigMap name owned (it may trail the API).
func (w *world) ownedAt(name string) time.Time {
	w.T.Helper()
	var owned time.Time
	w.Eventually("the recorder saw "+name+" owned", func() error {
		if _, owned = w.rec.at("ConfigMap", name); owned.IsZero() {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	return owned
}

// newReplicaSet waits for a ReplicaSet other than old to appear and returns it.
func (w *world) newReplicaSet(old *appsv1.ReplicaSet) *appsv1.ReplicaSet {
	w.T.Helper()
	var rs *appsv1.ReplicaSet
	w.Eventually("a new ReplicaSet", func() error {
		list, err := w.Kube.AppsV1().ReplicaSets(w.NS).List(w.Ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range list.Items {
			if list.Items[i].UID != old.UID {
				rs = &list.Items[i]
				return nil
			}
		}
		return fmt.Errorf("only ReplicaSet %s", old.Name)
	})
	return rs
}
