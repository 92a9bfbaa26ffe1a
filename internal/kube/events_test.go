package kube

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Normal Events of one namespace and reason share a spam bucket (a burst of attaches
// writes EventBurst Events); a Warning keeps one per involved object.
func TestEventSpamKeyBuckets(t *testing.T) {
	ev := func(typ, reason, ns, name string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns}, Type: typ, Reason: reason,
			Source:         corev1.EventSource{Component: UserAgent},
			InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Namespace: ns, Name: name, UID: types.UID("u-" + name)}}
	}
	cases := []struct {
		name string
		a, b *corev1.Event
		same bool
	}{
		{"attached, two objects, one namespace", ev("Normal", "Attached", "shop", "cfg-1"), ev("Normal", "Attached", "shop", "cfg-2"), true},
		{"attached, two namespaces", ev("Normal", "Attached", "shop", "cfg-1"), ev("Normal", "Attached", "web", "cfg-1"), false},
		{"two reasons", ev("Normal", "Attached", "shop", "cfg-1"), ev("Normal", "Deleted", "shop", "cfg-1"), false},
		{"warnings, two objects", ev("Warning", "GivenUp", "shop", "rs-1"), ev("Warning", "GivenUp", "shop", "rs-2"), false},
		{"warnings, one object", ev("Warning", "GivenUp", "shop", "rs-1"), ev("Warning", "GivenUp", "shop", "rs-1"), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.same, EventSpamKey(tc.a) == EventSpamKey(tc.b))
		})
	}
}
