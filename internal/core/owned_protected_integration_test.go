package core_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// Safety rule 11 on the real apiserver and garbage collector, from live reads (the
// one-shot commands) and from the informer cache (the service), on both entry points:
// `shared` (no label) is listed by a-1's annotation and mounted by b-1, so the attach of
// a-1 makes both owners; a-1 goes; b-2 mounts it and is attached (Attach), or a later
// Pod is (AttachRevision); b-1 goes; the garbage collector keeps `shared`.
func TestOwnedSharedConfigOutlivesItsListerOnTheRealGarbageCollector(t *testing.T) {
	for _, reader := range []string{"live", "cache"} {
		t.Run(reader, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			e.configMap("shared", nil)
			b1 := e.replicaSet("b-1", nil, podTemplate("b", "shared"))
			a1 := e.replicaSet("a-1", nil, podTemplate("a"), func(rs *appsv1.ReplicaSet) {
				rs.Annotations = map[string]string{core.AnnotationConfigMaps: "shared"}
			})
			a := e.attacher
			if reader == "cache" {
				a = e.cachedAttacher()
			}
			attach := func(rs *appsv1.ReplicaSet) core.ObjectResult {
				t.Helper()
				var or core.ObjectResult
				// The cache may not have seen the ReplicaSet's owners yet: wait for the outcome.
				controlplane.Eventually(t, 10*time.Second, "the attach of "+rs.Name, func() error {
					res, err := a.Attach(ctx, e.event(rs, core.DefaultOptions()))
					if err != nil {
						return err
					}
					if or = resultFor(res, core.KindConfigMap, "shared"); or.Outcome != core.OutcomeAttached && or.Outcome != core.OutcomeAlreadyAttached {
						return fmt.Errorf("%+v", or)
					}
					return nil
				})
				return or
			}
			attach(a1)
			assert.ElementsMatch(t, []types.UID{a1.UID, b1.UID}, ownerUIDs(e.owners(core.KindConfigMap, "shared")), "every user protects it")

			e.deleteUser("ReplicaSet", "a-1")
			e.waitOwnerDropped("shared", a1.UID)
			b2 := e.replicaSet("b-2", nil, podTemplate("b", "shared"))
			or := attach(b2)
			if or.Outcome == core.OutcomeAttached { // not a retry of the wait
				assert.Contains(t, or.Reason, "already owned by ReplicaSet b-1")
			}
			assert.Contains(t, ownerUIDs(e.owners(core.KindConfigMap, "shared")), b2.UID)

			// A bare Pod that mounts it later is attached from the revision side.
			pod := e.user("Pod", "debug", podTemplate("debug", "shared"))
			controlplane.Eventually(t, 10*time.Second, "the revision side attaches the Pod", func() error {
				res, err := a.AttachRevision(ctx, core.RevisionEvent{Kind: core.KindConfigMap, Namespace: e.ns, Name: "shared", Options: core.DefaultOptions()})
				if err != nil {
					return err
				}
				if !hasOwnerUID(e.owners(core.KindConfigMap, "shared"), pod.GetUID()) {
					return fmt.Errorf("%+v", res.Objects)
				}
				return nil
			})

			e.deleteUser("ReplicaSet", "b-1")
			e.waitOwnerDropped("shared", b1.UID)
			require.ElementsMatch(t, []types.UID{b2.UID, pod.GetUID()}, ownerUIDs(e.owners(core.KindConfigMap, "shared")))
		})
	}
}
