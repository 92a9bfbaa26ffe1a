package core_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Rule 3 (issue 16): a revision that a StatefulSet, DaemonSet, Job, CronJob or bare Pod
// also uses survives its last ReplicaSet. The ReplicaSet's attach makes the other user
// an owner (through the ControllerRevision its controller wrote for a StatefulSet or
// DaemonSet); the real garbage collector then keeps the revision after the ReplicaSet
// is deleted, and deletes it once the other user is gone.
func TestEveryUserProtectsTheRevision(t *testing.T) {
	for _, tc := range []struct {
		kind      string
		ownerKind string // the kind that becomes the owner
	}{
		{"StatefulSet", "ControllerRevision"},
		{"DaemonSet", "ControllerRevision"},
		{"Job", "Job"},
		{"CronJob", "CronJob"},
		{"Pod", "Pod"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			e.revision("cfg")
			user := e.user(tc.kind, "other", podTemplate("other", "cfg"))
			rs := e.replicaSet("web-1", nil, podTemplate("web", "cfg"))

			res, err := e.attacher.Attach(ctx, e.event(rs, core.DefaultOptions()))
			require.NoError(t, err)
			o := resultFor(res, core.KindConfigMap, "cfg")
			require.Equal(t, core.OutcomeAttached, o.Outcome, "%+v", o)
			require.Len(t, o.Owners, 2, "%+v", o)
			assert.Equal(t, "ReplicaSet/web-1", o.Owners[0])
			assert.True(t, strings.HasPrefix(o.Owners[1], tc.ownerKind+"/other"), "%v", o.Owners)
			for _, ref := range e.owners(core.KindConfigMap, "cfg") {
				assert.False(t, *ref.Controller, "rule 3: never a controller owner: %+v", ref)
				assert.Nil(t, ref.BlockOwnerDeletion, "%+v", ref)
			}

			e.deleteUser("ReplicaSet", rs.Name)
			e.waitOwnerDropped("cfg", rs.UID) // the GC has processed the deletion and kept cfg
			assert.Len(t, e.owners(core.KindConfigMap, "cfg"), 1, "the other user's owner remains")

			e.deleteUser(tc.kind, user.GetName())
			e.waitConfigMapGone("cfg")
		})
	}
}
