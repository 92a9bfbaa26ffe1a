package acceptance_test

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Safety rule 11 (issue 25, finding 1), on the real Argo Rollouts controller, kwok Pods
// and the real garbage collector: `shared` has no opt-in label; team B's Rollout mounts
// it; another workload lists it in configmap-attacher.io/configmaps, so the service
// attaches it to that workload's ReplicaSet and to B's b-1 (every user protects it).
// The listing goes; B's next ReplicaSet b-2 mounts `shared` and must be attached too
// (it is owned: once owned, protected while used), so that when b-1 leaves the history
// (revisionHistoryLimit 0) the garbage collector keeps `shared` and b-2's restarted Pods
// start. The guard fails the test if any Pod is created while `shared` is missing.
func TestOwnedConfigStaysWhileAnotherTeamStillMountsIt(t *testing.T) {
	t.Run("team A stops listing it and moves on", func(t *testing.T) {
		w := newWorld(t)
		w.ServeWatcher()
		b1 := w.teamB()
		a := app{name: "a", replicas: 1, configMap: "a-config-1", version: "1", history: ptr(int32(0))}
		w.revision(a.configMap)
		w.deployListing(a, "shared")
		ra1 := w.waitHealthy(a)
		w.waitOwned("ConfigMap", "shared", ra1)
		w.waitOwned("ConfigMap", "shared", b1)

		// A drops the listing and rolls out its next template: its old ReplicaSet leaves.
		w.unlist(a.name)
		a2 := a.with("a-config-2", "2")
		w.revision(a2.configMap)
		w.deploy(a2)
		w.waitHealthy(a2)
		w.WaitGone("ReplicaSet "+ra1.Name, func() error { _, err := w.getErr(ra1); return err })
		w.waitOwnersExactly("shared", b1.UID)
		w.teamBMovesOn(b1)
	})
	t.Run("a workload lists another team's config on purpose and is deleted", func(t *testing.T) {
		w := newWorld(t)
		w.ServeWatcher()
		b1 := w.teamB()
		// The attacker needs only create and delete rights on Deployments.
		w.configMapPlain("bait")
		tmpl := app{name: "attacker", configMap: "bait"}.podTemplate()
		d, err := w.Kube.AppsV1().Deployments(w.NS).Create(w.Ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "attacker", Annotations: map[string]string{core.AnnotationConfigMaps: "shared"}},
			Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels},
				Template: tmpl},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create Deployment attacker: %v", err)
		}
		var evil *appsv1.ReplicaSet
		w.Eventually("the attacker's ReplicaSet", func() error {
			rss := w.replicaSets(d.Name)
			if len(rss) != 1 {
				return fmt.Errorf("%d ReplicaSets", len(rss))
			}
			evil = &rss[0]
			return nil
		})
		w.waitOwned("ConfigMap", "shared", evil)
		w.waitOwned("ConfigMap", "shared", b1)
		if err := w.Kube.AppsV1().Deployments(w.NS).Delete(w.Ctx, d.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete Deployment attacker: %v", err)
		}
		w.WaitGone("ReplicaSet "+evil.Name, func() error { _, err := w.getErr(evil); return err })
		w.waitOwnersExactly("shared", b1.UID)
		w.teamBMovesOn(b1)
	})
}

// teamBApp is team B's Rollout: it mounts the unlabelled `shared`, and keeps no old
// ReplicaSet (revisionHistoryLimit 0), so b-1 leaves as soon as b-2 is healthy.
var teamBApp = app{name: "b", replicas: 2, configMap: "shared", version: "1", history: ptr(int32(0))}

// teamB creates `shared` (no label) and team B's Rollout on it, and returns b-1: not
// attached, since nothing opts `shared` in or lists it yet.
func (w *world) teamB() *appsv1.ReplicaSet {
	w.T.Helper()
	w.configMapPlain("shared")
	w.deploy(teamBApp)
	b1 := w.waitHealthy(teamBApp)
	if owners := w.mustExist("shared").OwnerReferences; len(owners) != 0 {
		w.T.Fatalf("shared is owned before anything lists it: %v", owners)
	}
	return b1
}

// teamBMovesOn rolls team B out to its next template (same `shared`): b-2 must own
// `shared` before b-1 leaves, `shared` must outlive b-1, and a restarted Pod of b-2
// must find it.
func (w *world) teamBMovesOn(b1 *appsv1.ReplicaSet) {
	w.T.Helper()
	v2 := teamBApp.with("shared", "2")
	w.deploy(v2)
	b2 := w.waitHealthy(v2)
	w.WaitGone("ReplicaSet "+b1.Name, func() error { _, err := w.getErr(b1); return err })
	w.waitOwned("ConfigMap", "shared", b2)
	w.replacePod(b2)
	w.mustExist("shared")
	if at, gone := w.events.deletedAt("ConfigMap", "shared"); gone {
		w.T.Fatalf("the garbage collector deleted shared at %s while %s mounts it", at.Format("15:04:05.000"), b2.Name)
	}
}

// deployListing creates the Rollout of a with the annotation listing names.
func (w *world) deployListing(a app, names string) {
	w.T.Helper()
	ro, err := a.rollout()
	if err != nil {
		w.T.Fatal(err)
	}
	ro.SetAnnotations(map[string]string{core.AnnotationConfigMaps: names})
	if _, err := w.Dynamic.Resource(core.RolloutGVR).Namespace(w.NS).Create(w.Ctx, ro, metav1.CreateOptions{}); err != nil {
		w.T.Fatalf("create Rollout %s: %v", a.name, err)
	}
}

// unlist removes the Rollout's configmap-attacher.io/configmaps annotation.
func (w *world) unlist(name string) {
	w.T.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, core.AnnotationConfigMaps)
	if _, err := w.Dynamic.Resource(core.RolloutGVR).Namespace(w.NS).Patch(w.Ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		w.T.Fatalf("unlist %s: %v", name, err)
	}
}

// configMapPlain creates a ConfigMap without the opt-in label.
func (w *world) configMapPlain(name string) {
	w.T.Helper()
	_, err := w.Kube.CoreV1().ConfigMaps(w.NS).Create(w.Ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"config.yaml": "name: " + name},
	}, metav1.CreateOptions{})
	if err != nil {
		w.T.Fatalf("create ConfigMap %s: %v", name, err)
	}
}

// waitOwnersExactly waits until the ConfigMap's owners are exactly uids (the garbage
// collector drops the owners that are gone).
func (w *world) waitOwnersExactly(name string, uids ...types.UID) {
	w.T.Helper()
	w.Eventually(fmt.Sprintf("ConfigMap %s owned by exactly %v", name, uids), func() error {
		got := w.mustExist(name).OwnerReferences
		if len(got) != len(uids) {
			return fmt.Errorf("owners %v", got)
		}
		for i, o := range got {
			if o.UID != uids[i] {
				return fmt.Errorf("owners %v", got)
			}
		}
		return nil
	})
}
