package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/cache"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// Issue 19 on the real control plane and the real informer cache: an event sent the
// moment its ReplicaSet is created (before the service's own watch can have delivered
// it) costs one GET, the live confirm, and one PATCH. The bound is long here so that a
// busy machine cannot turn the wait into a live read; the unit test proves the fallback.
func TestEventAtTheCreateCostsOneGetWithTheRealCache(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, c := e.cachedAttacherWith(cache.Options{ReplicaSetWait: time.Minute})
	e.revision("cfg")
	controlplane.Eventually(t, 10*time.Second, "the cache to see cfg", func() error {
		before := c.Misses("configmaps")
		if _, err := c.ObjectMeta(ctx, core.KindConfigMap, e.ns, "cfg"); err != nil {
			return err
		}
		if c.Misses("configmaps") != before {
			return errors.New("not cached yet")
		}
		return nil
	})
	e.counter.Reset()
	rs := e.replicaSet("web-1", nil, podTemplate("web", "cfg"))
	res, err := a.Attach(ctx, e.event(rs, core.DefaultOptions()))
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeAttached, outcomes(res)["ConfigMap/cfg"], "%+v", res)
	assert.Equal(t, 1, e.counter.Count("GET"), "one GET: the confirm")
	assert.Equal(t, 1, e.counter.Writes())
	assert.Equal(t, []types.UID{rs.UID}, ownerUIDs(e.owners(core.KindConfigMap, "cfg")))
	assert.Zero(t, c.Waits("timeout"))
}
