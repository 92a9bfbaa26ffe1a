package gc

import "github.com/configmap-attacher/configmap-attacher/internal/core"

// Summary is a one-line account of the report's outcomes sorted by outcome, e.g.
// "2 deleted, 1 kept", or "no revisions" when there are none.
func (r *Report) Summary() string {
	counts := map[Outcome]int{}
	for _, it := range r.Results {
		counts[it.Outcome]++
	}
	if s := core.JoinCounts(counts); s != "" {
		return s
	}
	return "no revisions"
}
