package acceptance_test

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Scenario 5. Pile-up: after revisionHistoryLimit+3 deploys the revisions left are
// exactly those of the ReplicaSets kept, and each revision goes right after its
// ReplicaSet (the lag is logged); revisionHistoryLimit 0 leaks nothing.
func TestPileUp(t *testing.T) {
	for _, limit := range []int32{2, 0} {
		t.Run(fmt.Sprintf("revisionHistoryLimit %d", limit), func(t *testing.T) {
			w := newWorld(t)
			w.ServeWatcher()
			base := app{name: "web", replicas: 2, history: ptr(limit)}
			deploys := int(limit) + 3
			for i := 1; i <= deploys; i++ {
				v := base.with(fmt.Sprintf("web-config-%d", i), fmt.Sprint(i))
				w.revision(v.configMap)
				w.deploy(v)
				rs := w.waitHealthy(v)
				w.waitOwned("ConfigMap", v.configMap, rs)
			}
			w.Eventually(fmt.Sprintf("%d ReplicaSets and exactly their revisions", limit+1), func() error {
				return w.revisionsMatchReplicaSets(base.name, int(limit)+1)
			})
			var deleted map[string][]string
			w.Eventually("the deletions seen", func() error {
				deleted = w.events.deletedReplicaSets()
				if want := deploys - int(limit) - 1; len(deleted) != want {
					return fmt.Errorf("%d ReplicaSets deleted, want %d: %v", len(deleted), want, deleted)
				}
				return nil
			})
			var lags []time.Duration
			for rs, cms := range deleted {
				for _, cm := range cms {
					lags = append(lags, w.lag("ReplicaSet", rs, "ConfigMap", cm))
				}
			}
			slices.Sort(lags)
			t.Logf("%d revisions collected after their ReplicaSets; lag min %s max %s", len(lags),
				lags[0].Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond))
		})
	}
}

// Scenario 6. A revision shared by two revisions of the template (same ConfigMap, other
// change) is owned by both ReplicaSets, survives the first one's deletion, and goes
// with the last.
func TestSharedRevision(t *testing.T) {
	w := newWorld(t)
	w.ServeWatcher()
	a := app{name: "web", replicas: 2, configMap: "web-config-1", version: "1", history: ptr(int32(0)), pause: true}
	b := a.with("web-config-1", "2")
	c := a.with("web-config-2", "3")

	w.revision(a.configMap)
	w.deploy(a)
	rsA := w.waitHealthy(a)
	w.deploy(b)
	rsB := w.waitPaused(b)
	w.waitOwned("ConfigMap", a.configMap, rsA)
	w.waitOwned("ConfigMap", a.configMap, rsB)
	if got := len(w.owners(a.configMap)); got != 2 {
		t.Fatalf("web-config-1 has %d owners, want 2 (both ReplicaSets)", got)
	}

	w.plugin("promote", a.name)
	w.waitHealthy(b)
	w.WaitGone("ReplicaSet "+rsA.Name, func() error { _, err := w.getErr(rsA); return err })
	w.Eventually("web-config-1 kept, owned by the second ReplicaSet alone", func() error {
		if got := w.owners(a.configMap); !slices.Equal(got, []string{string(rsB.UID)}) {
			return fmt.Errorf("owners %v, want only %s", got, rsB.UID)
		}
		return nil
	})

	w.revision(c.configMap)
	w.deploy(c)
	w.waitPaused(c)
	w.plugin("promote", a.name)
	w.waitHealthy(c)
	w.WaitGone("ReplicaSet "+rsB.Name, func() error { _, err := w.getErr(rsB); return err })
	w.waitConfigMapGone(a.configMap)
	w.lag("ReplicaSet", rsB.Name, "ConfigMap", a.configMap)
}
