package faults_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// Two real `serve` processes given one identity, started at once beside a third
// replica, never run a cluster together (the Leases fence by holder identity: both
// would lead every shard of it); one of them waits, saying so, and when the other is
// SIGKILLed every cluster is owned again within 30 s (docs/design.md, "One identity,
// one process").
func TestTwoServeProcessesWithOneIdentityNeverOwnAClusterTogether(t *testing.T) {
	fleetRuns++
	prefix := fmt.Sprintf("twins%d", fleetRuns) // -count=N runs on one control plane
	h := newFleetHub(t, nil, prefix, 6)
	names := []string{"in-cluster"}
	for i := range 6 {
		names = append(names, fmt.Sprintf("%s-c%d", prefix, i))
	}
	twins := [2]string{"r-x#1", "r-x#2"}
	for _, key := range twins {
		s := h.start(t, "r-x", prefix)
		delete(h.replicas, "r-x")
		h.replicas[key] = s
	}
	h.start(t, "r-b", prefix)

	assert.Empty(t, runByTwo(h, names, 25*time.Second), "clusters run by two replicas at once")
	controlplane.Eventually(t, 30*time.Second, "every cluster owned once", func() error { return h.exactlyOne(names) })

	var waiting, renewing []string
	for _, key := range twins {
		if v, err := h.replicas[key].metric("configmap_attacher_fleet_identity_waiting", nil); err == nil && v == 1 {
			waiting = append(waiting, key)
		} else {
			renewing = append(renewing, key)
		}
	}
	if !assert.Len(t, waiting, 1, "one twin waits") || len(renewing) != 1 {
		return
	}
	h.replicas[renewing[0]].kill()
	killed := time.Now()
	controlplane.Eventually(t, 30*time.Second, "every cluster owned once after the renewing twin's kill", func() error {
		return h.exactlyOne(names)
	})
	t.Logf("the renewing twin SIGKILLed: every cluster owned again after %s", time.Since(killed).Round(100*time.Millisecond))
	owners := h.owners(names)
	for _, c := range names {
		assert.Len(t, owners[c], 1, "cluster %s", c)
	}
}

// Real `serve` processes of two --fleet-shards (a rolling update changing it) never run
// a cluster together: the one that joins holds nothing; once the replica of the fleet's
// count (the oldest's) is SIGKILLed, the other owns every cluster within 30 s (with
// these 6 s Leases: 13.5 s measured, the member Lease's expiry, then the shard Leases'
// seen anew by electors started only then).
func TestServeProcessesOfTwoShardCountsNeverOwnAClusterTogether(t *testing.T) {
	fleetRuns++
	prefix := fmt.Sprintf("counts%d", fleetRuns) // -count=N runs on one control plane
	h := newFleetHub(t, nil, prefix, 6)
	names := []string{"in-cluster"}
	for i := range 6 {
		names = append(names, fmt.Sprintf("%s-c%d", prefix, i))
	}
	old := h.start(t, "r-old", prefix)
	controlplane.Eventually(t, 60*time.Second, "every cluster owned once", func() error { return h.exactlyOne(names) })
	h.start(t, "r-new", prefix, "--fleet-shards", "16")
	assert.Empty(t, runByTwo(h, names, 15*time.Second), "clusters run by two replicas at once")
	owners := h.owners(names)
	for _, c := range names {
		assert.Equal(t, []string{"r-old"}, owners[c], "cluster %s: the replica of the fleet's count runs it", c)
	}
	old.kill()
	killed := time.Now()
	controlplane.Eventually(t, 30*time.Second, "every cluster owned by the new count's replica", func() error {
		owners := h.owners(names)
		for _, c := range names {
			if o := owners[c]; len(o) != 1 || o[0] != "r-new" {
				return fmt.Errorf("cluster %s owned by %v", c, o)
			}
		}
		return nil
	})
	t.Logf("the old count's replica SIGKILLed: every cluster owned again after %s", time.Since(killed).Round(100*time.Millisecond))
}

// runByTwo samples the owners of names every 100 ms for d and returns every sighting of a
// cluster run by more than one replica.
func runByTwo(h *fleetHub, names []string, d time.Duration) []string {
	var twice []string
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for c, o := range h.owners(names) {
			if len(o) > 1 {
				twice = append(twice, fmt.Sprintf("%s by %v", c, o))
			}
		}
	}
	return twice
}
