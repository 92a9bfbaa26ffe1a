package shard

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	heldDesc = prometheus.NewDesc("configmap_attacher_fleet_shards_held",
		"Shards this replica holds (their Leases) and runs the clusters of.", nil, nil)
	membersDesc = prometheus.NewDesc("configmap_attacher_fleet_members",
		"Replicas of the fleet alive as this replica sees their member Leases (itself included).", nil, nil)
	clustersDesc = prometheus.NewDesc("configmap_attacher_fleet_clusters",
		"Registered clusters by ownership as this replica sees the fleet's Leases: unowned (no replica holds their shard), "+
			"multiple-owners (two or more replicas claim their shard); both 0 in steady state.", []string{"state"}, nil)
	waitingDesc = prometheus.NewDesc("configmap_attacher_fleet_identity_waiting",
		"1 while another instance renews the member Lease of this replica's identity (two replicas given one identity): "+
			"this one holds no shard until that Lease expires or is deleted; 0 otherwise.", nil, nil)
	mismatchDesc = prometheus.NewDesc("configmap_attacher_fleet_shard_count_mismatch",
		"1 while this replica's --fleet-shards is not the fleet's (its oldest live member's): this one holds no shard "+
			"until the members of the fleet's count are gone; 0 otherwise.", nil, nil)
)

// Collector returns the fleet's metrics, read at scrape time from the Leases this
// replica watches: configmap_attacher_fleet_shards_held, configmap_attacher_fleet_members,
// configmap_attacher_fleet_clusters{state="unowned"|"multiple-owners"},
// configmap_attacher_fleet_identity_waiting and configmap_attacher_fleet_shard_count_mismatch.
func (m *Manager) Collector() prometheus.Collector { return collector{m} }

type collector struct{ m *Manager }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- heldDesc
	ch <- membersDesc
	ch <- clustersDesc
	ch <- waitingDesc
	ch <- mismatchDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	m, now := c.m, time.Now()
	v := m.view(now)
	ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(len(m.held.list())))
	ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(v.live))
	ch <- prometheus.MustNewConstMetric(waitingDesc, prometheus.GaugeValue, gauge(m.waiting.Load()))
	ch <- prometheus.MustNewConstMetric(mismatchDesc, prometheus.GaugeValue, gauge(m.mismatch.Load()))
	if m.o.Clusters == nil {
		return
	}
	owners := m.owners(now, v.count)
	var unowned, multiple float64
	for name, pin := range m.o.Clusters() {
		switch n := owners[Of(name, pin, v.count)]; {
		case n == 0:
			unowned++
		case n > 1:
			multiple++
		}
	}
	ch <- prometheus.MustNewConstMetric(clustersDesc, prometheus.GaugeValue, unowned, "unowned")
	ch <- prometheus.MustNewConstMetric(clustersDesc, prometheus.GaugeValue, multiple, "multiple-owners")
}

func gauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// owners counts, per shard of the fleet's count, the replicas that hold it: the claims
// of the live members of that count (their member Leases list the shards they hold; this
// replica's own from memory), and at least one where the shard's Lease has a fresh holder.
func (m *Manager) owners(now time.Time, count int) map[int]int {
	out := map[int]int{}
	for _, i := range m.held.list() {
		out[i]++
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := m.o.Fleet + "-member-"
	for name, l := range m.leases {
		id, ok := strings.CutPrefix(name, prefix)
		if !ok || id == m.o.Identity || !l.fresh(now) || l.shards == "" || l.count != 0 && l.count != count {
			continue
		}
		for _, f := range strings.Split(l.shards, ",") {
			if i, err := strconv.Atoi(f); err == nil {
				out[i]++
			}
		}
	}
	for i := 0; i < count; i++ {
		if l, ok := m.leases[m.o.shardLease(i)]; ok && l.fresh(now) && out[i] == 0 {
			out[i] = 1
		}
	}
	return out
}
