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
)

// Collector returns the fleet's metrics, read at scrape time from the Leases this
// replica watches: configmap_attacher_fleet_shards_held, configmap_attacher_fleet_members
// and configmap_attacher_fleet_clusters{state="unowned"|"multiple-owners"}.
func (m *Manager) Collector() prometheus.Collector { return collector{m} }

type collector struct{ m *Manager }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- heldDesc
	ch <- membersDesc
	ch <- clustersDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	m, now := c.m, time.Now()
	ids, _ := m.members(now)
	ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(len(m.held.list())))
	ch <- prometheus.MustNewConstMetric(membersDesc, prometheus.GaugeValue, float64(len(ids)))
	if m.o.Clusters == nil {
		return
	}
	owners := m.owners(now)
	var unowned, multiple float64
	for name, pin := range m.o.Clusters() {
		switch n := owners[Of(name, pin, m.o.Shards)]; {
		case n == 0:
			unowned++
		case n > 1:
			multiple++
		}
	}
	ch <- prometheus.MustNewConstMetric(clustersDesc, prometheus.GaugeValue, unowned, "unowned")
	ch <- prometheus.MustNewConstMetric(clustersDesc, prometheus.GaugeValue, multiple, "multiple-owners")
}

// owners counts, per shard, the replicas that hold it: the claims of the live members
// (their member Leases list the shards they hold; this replica's own from memory), and
// at least one where the shard's Lease has a fresh holder.
func (m *Manager) owners(now time.Time) map[int]int {
	out := map[int]int{}
	for _, i := range m.held.list() {
		out[i]++
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	prefix := m.o.Fleet + "-member-"
	for name, l := range m.leases {
		id, ok := strings.CutPrefix(name, prefix)
		if !ok || id == m.o.Identity || !l.fresh(now) || l.shards == "" {
			continue
		}
		for _, f := range strings.Split(l.shards, ",") {
			if i, err := strconv.Atoi(f); err == nil {
				out[i]++
			}
		}
	}
	for i := 0; i < m.o.Shards; i++ {
		if l, ok := m.leases[m.o.shardLease(i)]; ok && l.fresh(now) && out[i] == 0 {
			out[i] = 1
		}
	}
	return out
}
