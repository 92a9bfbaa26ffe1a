package cache

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// A Pod of a StatefulSet's new template is covered by its StatefulSet (its revision),
// never an owner, even when the Pod informer holds the Pod while the StatefulSet and
// ControllerRevision informers (each its own watch, all started at once by lazyUsers
// with lists of their own) still hold the StatefulSet's previous template and not yet
// its new revision: the controller is cached, yet the answer is partial, and Users reads
// live instead (docs/safety.md, "Every user protects a revision").
func TestPodOfAStatefulSetTemplateTheCacheLagsIsNeverAnOwner(t *testing.T) {
	tests := []struct {
		name      string
		lag       bool
		wantOwner []string
	}{
		{name: "StatefulSet and revision cached: the Pod covered", wantOwner: []string{"ControllerRevision/db-5d8f (StatefulSet/db)"}},
		{name: "StatefulSet cached with its previous template, revision not yet: the Pod covered", lag: true,
			wantOwner: []string{"ControllerRevision/db-5d8f (StatefulSet/db)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sts := &appsv1.StatefulSet{ObjectMeta: objMeta("db", "sts-1", nil), Spec: appsv1.StatefulSetSpec{Template: template("cfg")}}
			cr := revisionOf(t, sts)
			pod := &corev1.Pod{ObjectMeta: objMeta("db-0", "pod-1", controller("StatefulSet", "db", "sts-1")), Spec: template("cfg").Spec}
			ctx := context.Background()
			c, _ := runFakeCache(t, Options{}, sts, cr, pod)
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			defer wcancel()
			require.True(t, c.awaitUsers(wctx), "user informers synced")
			if tc.lag {
				// The StatefulSet and ControllerRevision watches lag behind the Pod one: the
				// stores hold the previous template and not the new revision (a test-only
				// stand-in for the lag; no event follows).
				stsInf := c.podControllers[schema.GroupKind{Group: "apps", Kind: "StatefulSet"}]
				old := sts.DeepCopy()
				old.Spec.Template = template("other")
				rec, err := toRecord(old)
				require.NoError(t, err)
				require.NoError(t, stsInf.GetIndexer().Update(rec))
				crInf := c.userInfs[0]
				obj, ok, err := crInf.GetStore().GetByKey("shop/" + cr.Name)
				require.NoError(t, err)
				require.True(t, ok)
				require.NoError(t, crInf.GetIndexer().Delete(obj))
			}

			u, err := c.Users(wctx, core.KindConfigMap, "shop", "cfg")
			require.NoError(t, err)
			assert.Equal(t, tc.wantOwner, ownerNames(u))
		})
	}
}
