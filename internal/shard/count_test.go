package shard

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

const mismatchGauge = "configmap_attacher_fleet_shard_count_mismatch"

// Replicas of two shard counts (a rolling update changing --fleet-shards) never share
// the shards: each count maps a cluster to another shard under the same Lease names, so
// the fleet's count is its oldest live member's, and a replica of another count holds
// nothing and says so (configmap_attacher_fleet_shard_count_mismatch) while the members
// of the fleet's count share every shard among themselves as if it were not there; once
// those are gone, it takes its share under its own count.
func TestOnlyTheReplicasOfTheOldestMembersShardCountHoldShards(t *testing.T) {
	tests := []struct {
		name       string
		old, newer int
	}{
		{name: "16 then 32 (a rolling update raising --fleet-shards)", old: 16, newer: 32},
		{name: "32 then 16 (lowering it)", old: 32, newer: 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			oldIDs, newIDs := []string{"o-0", "o-1"}, []string{"n-0", "n-1"}
			var stops []func()
			defer func() {
				for _, stop := range stops {
					stop()
				}
			}()
			var grabbed atomic.Int64 // shards a new replica held while the old ones were there
			start := func(ids []string, shards int) ([]*Manager, func()) {
				ctx, cancel := context.WithCancel(context.Background())
				ms := make([]*Manager, len(ids))
				var done []chan error
				for k, id := range ids {
					o := fleetOptions(client, id, shards, slog.New(slog.DiscardHandler))
					o.Grace = 0 // one lease duration, as served: a Lease never held is anyone's after it
					o.OnChange = grabs(&ms[k], oldIDs, shards, &grabbed)
					m, err := New(o)
					require.NoError(t, err)
					ch := make(chan error, 1)
					go func() { ch <- m.Run(ctx) }()
					ms[k], done = m, append(done, ch)
				}
				stop := func() {
					cancel()
					for _, ch := range done {
						require.NoError(t, <-ch)
					}
				}
				stops = append(stops, stop)
				return ms, stop
			}

			olds, stopOld := start(oldIDs, tt.old)
			waitFor(t, "each shard held by its preferred old replica", func() error { return heldByPreferred(client, tt.old, oldIDs) })
			grabbed.Store(0) // from here on, every shard a replica holds that an old one is not preferred for
			newers, _ := start(newIDs, tt.newer)
			for _, m := range newers {
				waitFor(t, m.Identity()+" to stand aside", func() error { return holds(m, 0, mismatchGauge, 1) })
			}
			// past the grace: a shard taken (one of 16-31, never held, is anyone's after it) or
			// handed to a new replica would show
			time.Sleep(3 * time.Second)
			require.NoError(t, heldByPreferred(client, tt.old, oldIDs), "the old replicas share every shard among themselves")
			for _, m := range newers {
				require.NoError(t, holds(m, 0, mismatchGauge, 1))
				assert.True(t, m.Settled(), "%s: standing aside is settled (holds nothing, as it must)", m.Identity())
				assert.Contains(t, m.Summary(), fmt.Sprintf("its shard count %d is not the fleet's %d (member o-0's, the oldest)", tt.newer, tt.old))
			}
			for _, m := range olds {
				g, err := gauges(m)
				require.NoError(t, err)
				assert.Zero(t, g[mismatchGauge], m.Identity())
				assert.Equal(t, 4.0, g["configmap_attacher_fleet_members"], "%s counts every live member", m.Identity())
			}

			require.Zero(t, grabbed.Load(), "shards held by a new replica while the old ones were there")
			stopOld()
			stops = stops[1:]
			waitFor(t, "each shard held by its preferred new replica", func() error { return heldByPreferred(client, tt.newer, newIDs) })
			for _, m := range newers {
				waitFor(t, m.Identity()+" to take part", func() error {
					if g, err := gauges(m); err != nil || g[mismatchGauge] != 0 {
						return fmt.Errorf("%s: %v %v", mismatchGauge, g[mismatchGauge], err)
					}
					return nil
				})
			}
			// A Lease is written before its taker's OnStartedLeading marks the shard held.
			waitFor(t, "every shard held by the new replicas", func() error {
				held := 0
				for _, m := range newers {
					held += len(m.held.list())
				}
				if held != tt.newer {
					return fmt.Errorf("%d of %d shards held", held, tt.newer)
				}
				return nil
			})
		})
	}
}

// The fleet's shard count is its oldest live member's (by start time, then identity),
// read from the member Leases; a member that says no count (a version before it) takes
// part whatever the count but does not set it, and a member of another count does not
// take part.
func TestTheFleetsShardCountIsItsOldestLiveMembersOwn(t *testing.T) {
	type member struct {
		id      string
		count   int
		started time.Duration // before this replica's start; 0 with count 0: says none
		expired bool
	}
	tests := []struct {
		name   string
		others []member
		count  int
		oldest string
		ids    []string
	}{
		{name: "alone: its own", count: 16, oldest: "self", ids: []string{"self"}},
		{name: "an older member's count", others: []member{{id: "a", count: 32, started: time.Hour}, {id: "b", count: 16, started: time.Minute}},
			count: 32, oldest: "a", ids: []string{"a"}},
		{name: "a younger member's count is not the fleet's", others: []member{{id: "a", count: 32, started: -time.Minute}, {id: "b", count: 16, started: -time.Hour}},
			count: 16, oldest: "self", ids: []string{"b", "self"}},
		{name: "started at once: the lower identity", others: []member{{id: "b", count: 16, started: time.Hour}, {id: "a", count: 32, started: time.Hour}},
			count: 32, oldest: "a", ids: []string{"a"}},
		{name: "a member saying no count takes part, not setting it", others: []member{{id: "a"}, {id: "b", count: 32, started: time.Hour}},
			count: 32, oldest: "b", ids: []string{"a", "b"}},
		{name: "an expired member is not counted", others: []member{{id: "a", count: 32, started: time.Hour, expired: true}},
			count: 16, oldest: "self", ids: []string{"self"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := New(Options{Client: fake.NewClientset(), Namespace: "fleet", Identity: "self", Address: "self:1"})
			require.NoError(t, err)
			for _, o := range tt.others {
				holder, secs, renew := o.id, int32(10), metav1.NewMicroTime(time.Now())
				if o.expired {
					renew = metav1.NewMicroTime(time.Now().Add(-time.Hour))
				}
				l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: DefaultFleet + "-member-" + o.id, Annotations: map[string]string{}},
					Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, RenewTime: &renew}}
				if o.count > 0 {
					l.Annotations[AnnotationShardCount] = strconv.Itoa(o.count)
					l.Annotations[AnnotationStarted] = m.started.Add(-o.started).Format(time.RFC3339Nano)
				}
				m.observe(l)
				if o.expired { // seen an hour ago, not renewed since
					n := m.leases[l.Name]
					n.changed = n.changed.Add(-time.Hour)
					m.leases[l.Name] = n
				}
			}
			v := m.view(time.Now())
			assert.Equal(t, tt.count, v.count)
			assert.Equal(t, tt.oldest, v.oldest)
			assert.Equal(t, tt.ids, v.ids)
			live := 1
			for _, o := range tt.others {
				if !o.expired {
					live++
				}
			}
			assert.Equal(t, live, v.live, "every live member, whatever its count")
		})
	}
}
