package acceptance_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

const windowWarning = "a rollback inside the window can reach a ReplicaSet whose config is gone"

// Scenario 13. A Rollout whose rollbackWindow.revisions (3) is larger than its
// revisionHistoryLimit (1): the service, which learns both from its cached Rollout,
// reports it when it attaches (a Warning Event on the Rollout) and `status` shows it
// under the Rollout. The hazard is real: after three releases the first ReplicaSet and
// its revision are gone (or the second's: the controller does not always keep the newer
// one), and a rollback to it (inside the window) creates Pods that reference a
// ConfigMap that no longer exists. Raising revisionHistoryLimit to the
// window clears the report.
func TestRollbackWindowBeyondHistoryIsReported(t *testing.T) {
	w := newWorld(t)
	w.ServeWatcher()
	base := app{name: "web", replicas: 2, history: ptr(int32(1))}
	v1 := base.with("web-config-1", "1")
	w.revision(v1.configMap)
	w.createRollout(v1, map[string]any{"canary": map[string]any{"steps": []any{}}},
		map[string]any{"rollbackWindow": map[string]any{"revisions": int64(3)}})
	rs1 := w.waitHealthy(v1)
	w.waitOwned("ConfigMap", v1.configMap, rs1)
	if out := w.statusOutput(); !strings.Contains(out, "WARNING spec.rollbackWindow.revisions 3 is larger than spec.revisionHistoryLimit 1: "+windowWarning) {
		t.Fatalf("status does not report the rollback window:\n%s", out)
	}

	versions := []app{v1}
	for i := 2; i <= 3; i++ {
		v := base.with(fmt.Sprintf("web-config-%d", i), fmt.Sprint(i))
		w.revision(v.configMap)
		w.deploy(v)
		rs := w.waitHealthy(v)
		w.waitOwned("ConfigMap", v.configMap, rs)
		versions = append(versions, v)
	}
	// Recorded by an attach that wrote (the first one's, unless the service's cache had not
	// seen the new Rollout yet: then a later release's).
	w.Eventually("a Warning Event on the Rollout", func() error { return w.rolloutWarning(v1.name) })
	// revisionHistoryLimit 1 keeps one old ReplicaSet (the controller does not always keep
	// the newer one): roll back to the release whose ReplicaSet is gone, inside the window.
	w.Eventually("two ReplicaSets and exactly their revisions", func() error { return w.revisionsMatchReplicaSets(base.name, 2) })
	var gone app
	for _, v := range versions[:2] {
		if _, err := w.replicaSetOf(v); err != nil {
			gone = v
		}
	}
	if gone.configMap == "" {
		t.Fatalf("no release's ReplicaSet was deleted: %v", w.replicaSets(base.name))
	}
	w.waitConfigMapGone(gone.configMap)
	// The controller recreates that release's ReplicaSet, whose Pods reference the
	// revision the garbage collector deleted with the old one (kwok runs them anyway).
	w.deploy(gone)
	w.waitHealthy(gone)
	violations := w.events.takeViolations()
	if len(violations) == 0 {
		t.Fatalf("the rollback to %s created no Pod referencing the deleted %s", gone.version, gone.configMap)
	}
	for _, v := range violations {
		if !strings.Contains(v, "ConfigMap "+gone.configMap) {
			t.Fatalf("unexpected missing reference: %s", v)
		}
	}
	t.Logf("the hazard the report names: %v", violations)

	patch := `{"spec":{"revisionHistoryLimit":3}}`
	if _, err := w.Dynamic.Resource(core.RolloutGVR).Namespace(w.NS).Patch(w.Ctx, v1.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := w.statusOutput(); strings.Contains(out, windowWarning) {
		t.Fatalf("status still reports the rollback window with revisionHistoryLimit 3:\n%s", out)
	}
}

// rolloutWarning finds the service's Warning Event about the rollback window on the Rollout.
func (w *world) rolloutWarning(name string) error {
	list, err := w.Kube.CoreV1().Events(w.NS).List(w.Ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, ev := range list.Items {
		if ev.InvolvedObject.Kind == core.RolloutKind && ev.InvolvedObject.Name == name && ev.Type == corev1.EventTypeWarning &&
			ev.Reason == core.ReasonRollbackWindow && strings.Contains(ev.Message, windowWarning) {
			return nil
		}
	}
	return fmt.Errorf("no %s Warning on Rollout %s among %d Events", core.ReasonRollbackWindow, name, len(list.Items))
}

// statusOutput runs `configmap-attacher status -n NS` and returns its output.
func (w *world) statusOutput() string {
	w.T.Helper()
	var out, errb bytes.Buffer
	code := cli.Main(w.Ctx, []string{"status", "--kubeconfig", cp.Kubeconfig(), "-n", w.NS}, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	if code != 0 {
		w.T.Fatalf("status exited %d: %s", code, errb.String())
	}
	return out.String()
}
