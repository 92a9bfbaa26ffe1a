package core

import (
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReasonGivenUp is the reason of the Warning Event recorded on a ReplicaSet whose event
// will not be retried (docs/design.md, "Answers").
const ReasonGivenUp = "AttachGivenUp"

// GaveUp records a Warning Event on the event's ReplicaSet saying that no way in will
// retry it and why (a permanent failure naming the object and the cause, or a retry
// limit reached), so that `kubectl describe` and `kubectl get events` show it. Nothing
// is recorded without a Recorder or for an event that names no valid ReplicaSet.
func (a *Attacher) GaveUp(ev Event, why string) {
	if a.cfg.Recorder == nil || ev.Validate() != nil {
		return
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ev.Namespace, Name: ev.Name, UID: ev.UID}}
	a.cfg.Recorder.Eventf(rs, corev1.EventTypeWarning, ReasonGivenUp,
		"configmap-attacher gave up attaching this ReplicaSet's config revisions: %s", clipTo(why, 512))
}

// clipTo shortens s to at most n bytes on a rune boundary, marking the cut.
func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
