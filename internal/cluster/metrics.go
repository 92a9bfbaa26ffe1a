package cluster

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	upDesc = prometheus.NewDesc("configmap_attacher_cluster_up",
		"1 when the cluster's last health probe (GET /readyz) succeeded, else 0.", []string{"cluster", "source"}, nil)
	syncedDesc = prometheus.NewDesc("configmap_attacher_cluster_synced",
		"1 when the cluster's informer caches have synced, else 0.", []string{"cluster"}, nil)
	registeredDesc = prometheus.NewDesc("configmap_attacher_cluster_registered",
		"1 for a registered cluster, 0 for an Argo CD cluster Secret that is invalid or conflicts.", []string{"cluster", "origin"}, nil)
	refusedDesc = prometheus.NewDesc("configmap_attacher_cluster_secret_refused",
		"1 for each Argo CD cluster Secret not served, by reason (invalid, exec-not-allowed, duplicate-name, duplicate-server, name-taken, cluster-cap); conflicts names the other Secrets of a duplicate.",
		[]string{"secret", "cluster", "reason", "conflicts"}, nil)
	ownedDesc = prometheus.NewDesc("configmap_attacher_cluster_owned",
		"1 when this replica runs the cluster (always, for a single replica), 0 when another replica of the fleet owns it.", []string{"cluster"}, nil)
)

// Collector returns a Prometheus collector of the registry's per-cluster state, read at
// scrape time: configmap_attacher_cluster_up{cluster,source},
// configmap_attacher_cluster_synced{cluster} and
// configmap_attacher_cluster_registered{cluster,origin}.
func (r *Registry) Collector() prometheus.Collector { return collector{r} }

type collector struct{ r *Registry }

// Describe implements prometheus.Collector.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- upDesc
	ch <- syncedDesc
	ch <- registeredDesc
	ch <- refusedDesc
	ch <- ownedDesc
}

// Collect implements prometheus.Collector.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	for _, st := range c.r.Statuses() {
		ch <- prometheus.MustNewConstMetric(registeredDesc, prometheus.GaugeValue, b(st.Registered), st.Name, st.Origin)
		if !st.Registered {
			if st.Reason != "" {
				ch <- prometheus.MustNewConstMetric(refusedDesc, prometheus.GaugeValue, 1, strings.TrimPrefix(st.Origin, "Argo CD Secret "),
					st.Name, st.Reason, strings.Join(st.Conflicts, ","))
			}
			continue
		}
		ch <- prometheus.MustNewConstMetric(ownedDesc, prometheus.GaugeValue, b(!st.Elsewhere), st.Name)
		if st.Elsewhere {
			continue
		}
		ch <- prometheus.MustNewConstMetric(upDesc, prometheus.GaugeValue, b(st.Reachable), st.Name, st.Source)
		ch <- prometheus.MustNewConstMetric(syncedDesc, prometheus.GaugeValue, b(st.Synced), st.Name)
	}
}
