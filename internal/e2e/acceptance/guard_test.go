package acceptance_test

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The guard the scenarios rely on is not vacuous: a Pod created referencing a ConfigMap
// that does not exist is reported.
func TestGuardReportsAPodWithAMissingConfigMap(t *testing.T) {
	w := newWorld(t)
	a := app{name: "orphan", configMap: "not-there", version: "1"}
	tmpl := a.podTemplate()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan"}, Spec: tmpl.Spec}
	if _, err := w.Kube.CoreV1().Pods(w.NS).Create(w.Ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got []string
	w.Eventually("the guard to report Pod orphan", func() error {
		got = append(got, w.events.takeViolations()...)
		if len(got) == 0 {
			return errors.New("nothing reported")
		}
		return nil
	})
	if len(got) != 1 || !strings.Contains(got[0], "ConfigMap not-there") {
		t.Fatalf("violations %v, want one naming ConfigMap not-there", got)
	}
}
