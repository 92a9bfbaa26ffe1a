package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// The start-up gate's rule: ready once the sources are in and every cluster known at
// start that runs here is in sync or down, or once the deadline passed; a cluster owned
// by another replica is never waited for.
func TestStartupGateOpensOnceEveryClusterKnownAtStartIsInSyncOrDown(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	before, after := t0.Add(10*time.Second), t0.Add(31*time.Second)
	deadline := t0.Add(30 * time.Second)
	synced := startupCluster{name: "synced", here: true, synced: true}
	down := startupCluster{name: "down", here: true, down: true}
	listing := startupCluster{name: "listing", here: true}
	listing2 := startupCluster{name: "a-listing", here: true}
	elsewhere := startupCluster{name: "elsewhere"}
	for _, tt := range []struct {
		name         string
		now          time.Time
		sources      bool
		pending      string
		clusters     []startupCluster
		wantOpen     bool
		byDeadline   bool
		wantStarting []string
		wantOf       int
	}{
		{name: "every cluster in sync: open", now: before, sources: true, clusters: []startupCluster{synced}, wantOpen: true, wantOf: 1},
		{name: "a cluster down counts as started: open", now: before, sources: true, clusters: []startupCluster{synced, down},
			wantOpen: true, wantOf: 2},
		{name: "a cluster still listing holds it", now: before, sources: true, clusters: []startupCluster{synced, listing, listing2},
			wantStarting: []string{"a-listing", "listing"}, wantOf: 3},
		{name: "a cluster owned by another replica is not waited for", now: before, sources: true,
			clusters: []startupCluster{synced, elsewhere}, wantOpen: true, wantOf: 1},
		{name: "no cluster known yet, sources not in: closed", now: before, pending: "the first list of Argo CD cluster Secrets"},
		{name: "every cluster in sync but the fleet not settled: closed", now: before, pending: "the fleet",
			clusters: []startupCluster{synced}, wantOf: 1},
		{name: "the deadline passed with a cluster still listing: open", now: after, sources: true,
			clusters: []startupCluster{synced, listing}, wantOpen: true, byDeadline: true, wantStarting: []string{"listing"}, wantOf: 2},
		{name: "the deadline passed before the sources: open", now: deadline, pending: "the fleet", wantOpen: true, byDeadline: true},
		{name: "nothing to wait for at the deadline is no deadline opening", now: after, sources: true, clusters: []startupCluster{synced},
			wantOpen: true, wantOf: 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := decideStartup(startupView{now: tt.now, deadline: deadline, sources: tt.sources, pending: tt.pending, clusters: tt.clusters})
			assert.Equal(t, tt.wantOpen, d.open)
			assert.Equal(t, tt.byDeadline, d.byDeadline)
			assert.Equal(t, tt.wantStarting, d.starting)
			assert.Equal(t, tt.wantOf, d.of)
		})
	}
}

// /readyz's summary line (anyone reads it) counts the clusters still starting and names
// none; the detail line (behind the token) names them, at most 20.
func TestStartupGateSummaryNamesNoClusterDetailNamesThem(t *testing.T) {
	many := make([]string, 23)
	for i := range many {
		many[i] = "c" + string(rune('a'+i))
	}
	for _, tt := range []struct {
		name        string
		d           startupDecision
		wantSummary string
		wantDetail  string
	}{
		{name: "clusters still starting",
			d:           startupDecision{starting: []string{"prod-eu", "prod-us"}, of: 5},
			wantSummary: "starting: 2 of 5 clusters known at start not in sync yet (start-up deadline in 12s)",
			wantDetail:  "still starting (caches not in sync): prod-eu, prod-us"},
		{name: "the sources awaited",
			d:           startupDecision{pending: "the first list of Argo CD cluster Secrets"},
			wantSummary: "starting: waiting for the first list of Argo CD cluster Secrets (start-up deadline in 12s)"},
		{name: "more than 20 clusters: the first 20 and a count",
			d:           startupDecision{starting: many, of: 30},
			wantSummary: "starting: 23 of 30 clusters known at start not in sync yet (start-up deadline in 12s)",
			wantDetail: "still starting (caches not in sync): ca, cb, cc, cd, ce, cf, cg, ch, ci, cj, ck, cl, cm, cn, co, cp, cq, cr, cs, ct, " +
				"… 3 more"},
		{name: "open (by the deadline): no detail", d: startupDecision{open: true, byDeadline: true, starting: []string{"x"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.d.open {
				assert.Equal(t, tt.wantSummary, tt.d.summary(12300*time.Millisecond))
			}
			n := len(tt.d.starting)
			assert.Equal(t, tt.wantDetail, tt.d.detail())
			assert.Len(t, tt.d.starting, n, "detail leaves the decision as it was")
		})
	}
}
