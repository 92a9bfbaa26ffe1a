package faults_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// A fleet with more replicas than shards: the replicas that hold no shard are ready
// once their first hand-over settled (they hold exactly the shards they are preferred
// for: none), not only at the start-up deadline, and every cluster has one owner
// (docs/design.md, "Readiness at start-up").
func TestAFleetReplicaHoldingNoShardIsReadyBeforeTheStartupDeadline(t *testing.T) {
	fleetRuns++
	prefix := fmt.Sprintf("noshard%d", fleetRuns) // -count=N runs on one control plane
	h := newFleetHub(t, nil, prefix, 2)
	names := []string{"in-cluster", prefix + "-c0", prefix + "-c1"}
	for _, id := range []string{"r-a", "r-b", "r-c"} {
		h.start(t, id, prefix, "--fleet-shards", "1")
	}
	controlplane.Eventually(t, 60*time.Second, "every cluster owned once", func() error { return h.exactlyOne(names) })
	for id, s := range h.replicas {
		b, err := os.ReadFile(s.log)
		require.NoError(t, err)
		assert.Contains(t, string(b), "start-up readiness: every cluster known at start is in sync or down", "replica %s", id)
		assert.NotContains(t, string(b), "start-up readiness: deadline passed", "replica %s", id)
	}
}
