package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// Breaker s6: a ReplicaSet the cache delivers during the wait and that is deleted and
// recreated (same name, new UID) before the write is never written as an owner. An
// event naming the delivered UID is refused; one naming no UID is planned again for the
// live namesake, and only the live UID is written.
func TestReplicaSetReplacedAfterTheWaitIsNeverWrittenAsOwner(t *testing.T) {
	const ns = "shop"
	delivered := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-1", UID: "rs-2"},
		Spec: appsv1.ReplicaSetSpec{Template: podTemplate("web", "cfg")}}
	live := delivered.DeepCopy()
	live.UID = "rs-3"
	cm := metav1.ObjectMeta{Namespace: ns, Name: "cfg", UID: "cm", ResourceVersion: "1", Labels: map[string]string{core.LabelRevision: "true"}}
	for _, tc := range []struct {
		name    string
		uid     types.UID
		refused bool
	}{
		{"the event names the delivered UID: refused", delivered.UID, true},
		{"the event names no UID: the live namesake is attached", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: cm}, live)
			var asked []types.UID
			r := awaitingReader{cachedReader: cachedReader{mapReader: mapReader{meta: map[string]*metav1.PartialObjectMetadata{"ConfigMap/cfg": {ObjectMeta: cm}}}},
				arrives: delivered, asked: &asked}
			a, err := core.NewAttacher(core.Config{Client: kc, Reader: r, Logger: testfix.Quiet()})
			require.NoError(t, err)
			_, err = a.Attach(context.Background(), core.Event{Namespace: ns, Name: "web-1", UID: tc.uid, Options: core.DefaultOptions()})
			assert.Equal(t, tc.refused, errors.Is(err, core.ErrRefused), "err: %v", err)
			var patches []string
			for _, act := range kc.Actions() {
				if p, ok := act.(k8stesting.PatchAction); ok {
					patches = append(patches, string(p.GetPatch()))
				}
			}
			for _, p := range patches {
				assert.NotContains(t, p, string(delivered.UID), "the dead UID written as an owner")
			}
			if tc.refused {
				assert.Empty(t, patches)
				return
			}
			require.NoError(t, err)
			require.Len(t, patches, 1)
			assert.True(t, strings.Contains(patches[0], string(live.UID)), "the live UID is the owner: %s", patches[0])
		})
	}
}
