package faults_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// sweepFlags make every owner sweep its clusters every 2 s, deleting each unreferenced
// opted-in revision once it is 5 s old (no keep-N): the grace period stays above the
// caches' lag, so a revision created for a ReplicaSet is referenced before it is old.
var sweepFlags = []string{"--gc-interval", "2s", "--gc-min-age", "5s", "--gc-keep", "0"}

// stop sends SIGTERM, as a Deployment scaling down does, and waits for the process.
func (s *service) stop() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM: %w", err)
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(60 * time.Second):
		return fmt.Errorf("serve did not stop within 60 s of SIGTERM: %s", tail(s.log, 30))
	}
}

// revisionSet creates the opted-in revision cm-NAME and ReplicaSet NAME using it in ns:
// a used revision, which no sweep may delete.
func revisionSet(t *testing.T, kc kubernetes.Interface, ns, name string) *appsv1.ReplicaSet {
	t.Helper()
	rs, err := createRevisionSet(context.Background(), kc, ns, name)
	require.NoError(t, err)
	return rs
}

// createRevisionSet is revisionSet for a goroutine: it returns the error.
func createRevisionSet(ctx context.Context, kc kubernetes.Interface, ns, name string) (*appsv1.ReplicaSet, error) {
	_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + name,
		Labels: map[string]string{core.LabelRevision: "true"}}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("revision cm-%s in %s: %w", name, ns, err)
	}
	rs, err := kc.AppsV1().ReplicaSets(ns).Create(ctx, replicaSet(name, "cm-"+name), metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("ReplicaSet %s in %s: %w", name, ns, err)
	}
	return rs, nil
}

// orphanRevisions creates n opted-in ConfigMaps PREFIX-i in ns that nothing references:
// what the sweeps delete. It returns their names.
func orphanRevisions(t *testing.T, kc kubernetes.Interface, ns, prefix string, n int) []string {
	t.Helper()
	names := make([]string, n)
	g, ctx := errgroup.WithContext(context.Background())
	g.SetLimit(16)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
		g.Go(func() error {
			_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names[i],
				Labels: map[string]string{core.LabelRevision: "true"}}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
			return err
		})
	}
	require.NoError(t, g.Wait())
	return names
}

// deletedOf returns the names of names that the watch saw deleted.
func (w *ownerWatch) deletedOf(names []string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, n := range names {
		if w.deleted[n] {
			out = append(out, n)
		}
	}
	return out
}

// usedRevisions are the ConfigMaps the ReplicaSets of sets use.
func usedRevisions(sets []*appsv1.ReplicaSet) map[string][]string {
	out := map[string][]string{}
	for _, rs := range sets {
		out[rs.Namespace] = append(out[rs.Namespace], "cm-"+rs.Name)
	}
	return out
}

// sweptAndKept is nil once every orphan of each namespace is deleted; it fails the test
// if any used revision was.
func sweptAndKept(t *testing.T, watches map[string]*ownerWatch, orphans, used map[string][]string) error {
	t.Helper()
	for ns, w := range watches {
		if d := w.deletedOf(used[ns]); len(d) > 0 {
			t.Fatalf("cluster %s: used revisions deleted: %v", ns, d)
		}
	}
	for ns, names := range orphans {
		if left := len(names) - len(watches[ns].deletedOf(names)); left > 0 {
			return fmt.Errorf("cluster %s: %d of %d orphans not swept yet", ns, left, len(names))
		}
	}
	return nil
}

// TestScalingTheFleetMovesAboutOneNthAndKeepsOneOwnerPerCluster: real `serve` processes
// share 12 Argo CD clusters (and the home cluster) and sweep them every 2 s; the fleet is
// scaled 3 → 4 (a replica starts) → 2 (two get SIGTERM at once, as a Deployment scaling
// down). At each steady state every cluster has exactly one owner, the preferred replica
// of its shard among the live ones (shard.Assign, balanced loads): scaling up moves
// clusters to the new replica and the few that balancing shifts between the others,
// scaling down moves every cluster of the stopped replicas and a few more, and each step
// moves well under all of them (the counts are logged; internal/shard's tests bound the
// shards moved); the ReplicaSets created during each churn are all attached afterwards,
// orphans created during it are swept, and no used revision is ever deleted.
func TestScalingTheFleetMovesAboutOneNthAndKeepsOneOwnerPerCluster(t *testing.T) {
	const n = 12
	fleetRuns++
	prefix := fmt.Sprintf("scale%d", fleetRuns)
	h := newFleetHub(t, nil, prefix, n)
	names := []string{"in-cluster"}
	watches := map[string]*ownerWatch{}
	var sets []*appsv1.ReplicaSet
	orphans := map[string][]string{}
	for i := range n {
		c := fmt.Sprintf("%s-c%d", prefix, i)
		names = append(names, c)
		watches[c] = watchOwners(t, h.kc, c)
		sets = append(sets, revisionSet(t, h.kc, c, "rs-a"), revisionSet(t, h.kc, c, "rs-b"))
		orphans[c] = orphanRevisions(t, h.kc, c, "old-start", 3)
	}
	for _, id := range []string{"r-a", "r-b", "r-c"} {
		h.start(t, id, prefix, sweepFlags...)
	}
	h.settled(t, names, 120*time.Second)
	controlplane.Eventually(t, 60*time.Second, "the first ReplicaSets attached", func() error { return attachedIn(h.kc, sets) })

	// 3 → 4: a replica joins while ReplicaSets and orphans are being created.
	controlplane.Eventually(t, 60*time.Second, "every cluster owned as assigned", func() error { return h.asAssigned(names) })
	before := h.owners(names)
	h.start(t, "r-d", prefix, sweepFlags...)
	sets = append(sets, h.churn(t, names[1:], "up", orphans)...)
	after := h.rebalanced(t, names)
	up, toNew := 0, 0
	for _, c := range names {
		if before[c][0] != after[c][0] {
			up++
			if after[c][0] == "r-d" {
				toNew++
			}
		}
	}
	t.Logf("3 → 4 replicas: %d of %d clusters moved, %d of them to r-d (about 1/4 expected)", up, len(names), toNew)
	assert.Positive(t, toNew, "the new replica took clusters")
	assert.LessOrEqual(t, up, 2*len(names)/3, "scaling up moves about 1/N of the clusters, not most of them")

	// 4 → 2: two replicas stop at once while ReplicaSets and orphans are being created.
	before = after
	stopped := []string{"r-a", "r-d"}
	g := errgroup.Group{}
	for _, id := range stopped {
		g.Go(h.replicas[id].stop)
	}
	sets = append(sets, h.churn(t, names[1:], "down", orphans)...)
	require.NoError(t, g.Wait())
	after = h.rebalanced(t, names)
	down, ofStopped := 0, 0
	for _, c := range names {
		if before[c][0] != after[c][0] {
			down++
		}
		if slices.Contains(stopped, before[c][0]) {
			ofStopped++
			assert.NotContains(t, stopped, after[c][0], "cluster %s still owned by a stopped replica", c)
		}
	}
	t.Logf("4 → 2 replicas: %d of %d clusters moved, %d of them from the 2 stopped replicas (about 1/2 expected)", down, len(names), ofStopped)
	assert.Less(t, down, len(names), "scaling down moves the stopped replicas' clusters and a few more, not all of them")

	controlplane.Eventually(t, 60*time.Second, "every ReplicaSet attached", func() error { return attachedIn(h.kc, sets) })
	used := usedRevisions(sets)
	controlplane.Eventually(t, 60*time.Second, "the orphans swept", func() error { return sweptAndKept(t, watches, orphans, used) })
	onlyOrphansDeleted(t, watches)
	for c, w := range watches {
		_, twice, _ := w.summary()
		assert.Zero(t, twice, "cluster %s: ConfigMaps written twice: %v", c, w.twiceWritten())
	}
}

// rebalanced waits until every cluster of names is owned as assigned among the live
// replicas and ownership has settled, and returns the owners.
func (h *fleetHub) rebalanced(t *testing.T, names []string) map[string][]string {
	t.Helper()
	controlplane.Eventually(t, 90*time.Second, "every cluster owned as assigned", func() error { return h.asAssigned(names) })
	h.settled(t, names, 90*time.Second)
	require.NoError(t, h.asAssigned(names))
	return h.owners(names)
}

// churn creates, in each cluster of names, a ReplicaSet rs-STEP with its revision and
// three orphans old-STEP-i, while ownership moves; it returns the ReplicaSets.
func (h *fleetHub) churn(t *testing.T, names []string, step string, orphans map[string][]string) []*appsv1.ReplicaSet {
	t.Helper()
	var sets []*appsv1.ReplicaSet
	for _, c := range names {
		sets = append(sets, revisionSet(t, h.kc, c, "rs-"+step))
		orphans[c] = append(orphans[c], orphanRevisions(t, h.kc, c, "old-"+step, 3)...)
	}
	return sets
}

// TestKillingTheSweepingReplicaMidSweepKeepsUsedRevisions: three real `serve` processes
// share 6 Argo CD clusters and sweep them every 2 s. One cluster gets 300 orphaned
// revisions beside 20 used ones; once its owner's sweep has deleted some of the orphans,
// that replica is SIGKILLed. Its clusters are owned again within 30 s (the Leases last
// 6 s), the ReplicaSets created meanwhile are attached, the new owner sweeps the rest of
// the orphans, and no used revision is deleted.
func TestKillingTheSweepingReplicaMidSweepKeepsUsedRevisions(t *testing.T) {
	const n, orphanCount = 6, 300
	fleetRuns++
	prefix := fmt.Sprintf("sweepkill%d", fleetRuns)
	h := newFleetHub(t, nil, prefix, n)
	names := []string{"in-cluster"}
	watches := map[string]*ownerWatch{}
	var sets []*appsv1.ReplicaSet
	for i := range n {
		c := fmt.Sprintf("%s-c%d", prefix, i)
		names = append(names, c)
		watches[c] = watchOwners(t, h.kc, c)
		sets = append(sets, revisionSet(t, h.kc, c, "rs-0"))
	}
	target := names[1]
	for i := 1; i < 20; i++ {
		sets = append(sets, revisionSet(t, h.kc, target, fmt.Sprintf("rs-%d", i)))
	}
	for _, id := range []string{"r-a", "r-b", "r-c"} {
		h.start(t, id, prefix, sweepFlags...)
	}
	h.settled(t, names, 120*time.Second)
	controlplane.Eventually(t, 60*time.Second, "the used revisions attached", func() error { return attachedIn(h.kc, sets) })

	orphans := map[string][]string{target: orphanRevisions(t, h.kc, target, "old", orphanCount)}
	victim := h.owners([]string{target})[target][0]
	var atKill int
	controlplane.Eventually(t, 60*time.Second, "the owner's sweep under way", func() error {
		if atKill = len(watches[target].deletedOf(orphans[target])); atKill < 5 {
			return fmt.Errorf("%d orphans deleted", atKill)
		}
		return nil
	})
	h.replicas[victim].kill()
	killed := time.Now()
	atKill = len(watches[target].deletedOf(orphans[target]))
	require.Less(t, atKill, orphanCount, "the kill landed mid-sweep")
	var late []*appsv1.ReplicaSet
	for _, c := range names[1:] {
		late = append(late, revisionSet(t, h.kc, c, "rs-late"))
	}
	controlplane.Eventually(t, 30*time.Second, "the killed replica's clusters owned again", func() error { return h.exactlyOne(names) })
	t.Logf("SIGKILLed %s mid-sweep of %s (%d of %d orphans deleted): its clusters owned again after %s", victim, target, atKill, orphanCount,
		time.Since(killed).Round(100*time.Millisecond))
	sets = append(sets, late...)
	controlplane.Eventually(t, 60*time.Second, "every ReplicaSet attached", func() error { return attachedIn(h.kc, sets) })
	used := usedRevisions(sets)
	controlplane.Eventually(t, 60*time.Second, "the new owner swept the rest", func() error { return sweptAndKept(t, watches, orphans, used) })
	t.Logf("the new owner %s swept the other %d orphans; %s after the kill", h.owners([]string{target})[target], orphanCount-atKill,
		time.Since(killed).Round(100*time.Millisecond))
	onlyOrphansDeleted(t, watches)
}

// onlyOrphansDeleted asserts that the watches saw no ConfigMap deleted but the orphans
// (old-*).
func onlyOrphansDeleted(t *testing.T, watches map[string]*ownerWatch) {
	t.Helper()
	for c, w := range watches {
		extra := slices.DeleteFunc(w.deletedNames(), func(name string) bool { return strings.HasPrefix(name, "old-") })
		sort.Strings(extra)
		assert.Empty(t, extra, "cluster %s: ConfigMaps deleted that were not orphans", c)
	}
}

// deletedNames lists every ConfigMap the watch saw deleted.
func (w *ownerWatch) deletedNames() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]string, 0, len(w.deleted))
	for n := range w.deleted {
		out = append(out, n)
	}
	return out
}
