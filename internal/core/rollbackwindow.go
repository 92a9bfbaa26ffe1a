package core

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ReasonRollbackWindow is the reason of the Warning Event recorded on a Rollout whose
// spec.rollbackWindow.revisions reaches past its revisionHistoryLimit (docs/design.md,
// "Argo Rollouts versions and features").
const ReasonRollbackWindow = "RollbackWindowBeyondHistory"

// RolloutsDefaultHistoryLimit is Argo Rollouts' spec.revisionHistoryLimit when unset.
const RolloutsDefaultHistoryLimit = 10

// RollbackWindowNote returns, for a Rollout whose spec.rollbackWindow.revisions is larger
// than its revisionHistoryLimit, why a rollback inside the window can find its config
// gone and the fix; "" otherwise. The controller keeps only revisionHistoryLimit old
// ReplicaSets; the older ones inside the window are deleted, and the garbage collector
// deletes their config revisions with them, so a rollback to one of them recreates a
// ReplicaSet whose ConfigMaps and Secrets no longer exist.
func RollbackWindowNote(ro *unstructured.Unstructured) string {
	window, ok, err := unstructured.NestedInt64(ro.Object, "spec", "rollbackWindow", "revisions")
	if !ok || err != nil || window <= 0 {
		return ""
	}
	limit, ok, err := unstructured.NestedInt64(ro.Object, "spec", "revisionHistoryLimit")
	if !ok || err != nil {
		limit = RolloutsDefaultHistoryLimit
	}
	if window <= limit {
		return ""
	}
	return fmt.Sprintf("spec.rollbackWindow.revisions %d is larger than spec.revisionHistoryLimit %d: a rollback inside the window "+
		"can reach a ReplicaSet whose config is gone (the controller keeps %d old ReplicaSets, and the garbage collector deletes "+
		"the config revisions of the others with them); set revisionHistoryLimit to at least %d", window, limit, limit, window)
}

// warnRollbackWindow records a Warning Event on the Rollout wl names for each of its
// notes (RollbackWindowNote). Attach calls it only when it wrote, so a replay of
// already-attached ReplicaSets records nothing.
func (a *Attacher) warnRollbackWindow(ns string, wl workload) {
	if a.cfg.Recorder == nil || wl.rollout == nil {
		return
	}
	for _, n := range wl.notes {
		ro := &unstructured.Unstructured{Object: map[string]any{}}
		ro.SetAPIVersion(RolloutGroup + "/" + RolloutVersion)
		ro.SetKind(RolloutKind)
		ro.SetNamespace(ns)
		ro.SetName(wl.rollout.GetName())
		ro.SetUID(wl.rollout.GetUID())
		a.cfg.Recorder.Eventf(ro, corev1.EventTypeWarning, ReasonRollbackWindow, "%s", n)
	}
}
