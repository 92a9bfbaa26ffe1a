package shard

import (
	"strconv"
	"time"
)

// One fleet, one shard count (docs/design.md, "Fleet"): replicas of different
// --fleet-shards (a rolling update changing it) hash a cluster to different shards under
// the same shard Lease names, so a cluster could have two owners. Each member says its
// count and start time on its member Lease; the fleet's count is its oldest live
// member's, and a replica of another count holds nothing until the fleet's is its own.

// memberOf returns the shard count and start time a member Lease's annotations say:
// 0 and the zero time for one that says none or says it wrong (a version before them).
func memberOf(annotations map[string]string) (int, time.Time) {
	count, err := strconv.Atoi(annotations[AnnotationShardCount])
	if err != nil || count <= 0 {
		return 0, time.Time{}
	}
	started, err := time.Parse(time.RFC3339Nano, annotations[AnnotationStarted])
	if err != nil {
		return 0, time.Time{}
	}
	return count, started
}

// older reports whether the member a (started at ta) comes before b: started earlier,
// or at the same time with the lower identity.
func older(ta time.Time, a string, tb time.Time, b string) bool {
	return ta.Before(tb) || ta.Equal(tb) && a < b
}

// takesPart reports whether this replica's shard count is the fleet's in view v. One
// whose count is not holds nothing: it stops its clusters and releases its shards
// (stopAll), contends for none, and says so once, until the fleet's count is its own
// (the members of the other count gone).
func (m *Manager) takesPart(v view) bool {
	if v.count == m.o.Shards {
		if m.mismatch.CompareAndSwap(true, false) {
			m.o.Logger.Info("the fleet's shard count is this replica's again: it takes part", "shards", m.o.Shards)
		}
		return true
	}
	if m.mismatch.CompareAndSwap(false, true) {
		m.o.Logger.Error("this replica's shard count is not the fleet's: it holds no shard until the members of the "+
			"fleet's count are gone", "shards", m.o.Shards, "fleetShards", v.count, "oldest", v.oldest)
	}
	if len(m.held.list()) > 0 || m.contending() {
		m.stopAll()
	}
	return false
}

// contending reports whether any shard elector runs.
func (m *Manager) contending() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.electors) > 0
}
