package dispatch_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
)

// An answer that comes back from the replica owning the cluster keeps its class, so
// every way in answers a forwarded event exactly as a local one.
func TestAForwardedAnswerKeepsItsClass(t *testing.T) {
	for _, c := range dispatch.Classes {
		t.Run(string(c), func(t *testing.T) {
			a := dispatch.AnswerOf(c, "the owner said so", "", dispatch.Response{})
			assert.Equal(t, c, a.Class)
			assert.Equal(t, c, dispatch.Classify(a.Err))
			assert.Equal(t, c.Retryable(), dispatch.Classify(a.Err).Retryable())
		})
	}
	a := dispatch.AnswerOf(dispatch.ClassInvalid, "namespace: bad", "namespace", dispatch.Response{})
	assert.Equal(t, "namespace", dispatch.FieldOf(a.Err), "an invalid field is named on this side too")
}

// RBAC's refusal of a write on the owner is "permission denied" on the replica the event
// came in on too (gRPC PermissionDenied, HTTP 403), not a plain permanent failure.
func TestAForwardedRBACRefusalStaysForbidden(t *testing.T) {
	a := dispatch.ForbiddenAnswerOf("ConfigMap ns/x: forbidden", dispatch.Response{})
	assert.Equal(t, dispatch.ClassPermanent, a.Class)
	assert.Equal(t, dispatch.ClassPermanent, dispatch.Classify(a.Err))
	assert.True(t, a.Forbidden())
	assert.Equal(t, "ConfigMap ns/x: forbidden", a.Err.Error())
	assert.False(t, dispatch.AnswerOf(dispatch.ClassPermanent, "immutable", "", dispatch.Response{}).Forbidden())
}

// Without a forwarding client, a cluster owned by another replica is retry-later,
// never an unknown cluster.
func TestAClusterOwnedElsewhereIsTransientWithoutForwarding(t *testing.T) {
	err := &dispatch.OwnedElsewhereError{Cluster: "prod", Owner: ""}
	assert.Equal(t, dispatch.ClassUnavailable, dispatch.Classify(err))
}
