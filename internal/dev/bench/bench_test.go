package bench_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/dev/bench"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.TestMain(m, &cp)) }

// TestSmoke runs every scenario of the harness at tiny sizes on the real control plane
// with the real service binary. It checks that the harness works and that the figures
// that are correctness, not speed (nothing lost, no write on replay, GC deletes exactly
// the orphans, memory was read), hold; it never asserts a timing.
func TestSmoke(t *testing.T) {
	c := controlplane.Require(t, cp)
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "configmap-attacher")
	build := exec.Command("go", "build", "-o", bin, "./cmd/configmap-attacher")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the service: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cfg := bench.Config{Binary: bin, ControlPlane: c, Paths: []string{"watcher", "http"},
		N: 5, Rate: 20, BurstN: 5, FloorN: 5, LegacyN: 1, ReplayN: 5,
		GCRevisions: 20, GCReplicaSets: 5, GCOrphans: 3, MemLevels: []int{10}, CurveN: 3,
		RSLevels: []int{10}, RSRevisions: 10, SweepNamespaces: 3, SweepRS: 2, SweepRevisions: 4,
		ClusterLevels: []int{1, 2}, ForwardN: 3, FleetClusters: 3, FleetReplicas: 2, LiveClusters: 2, LiveRS: 3, LiveN: 4,
		Settle: 30 * time.Second, LogDir: t.TempDir(), ResultsDir: t.TempDir(), Logf: t.Logf}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Log("\n" + rep.Table())
	if len(rep.Errors) > 0 {
		t.Fatalf("scenario errors: %s", strings.Join(rep.Errors, "; "))
	}
	if rep.Floor == nil || rep.Floor.RTT.N != 5 {
		t.Errorf("floor: %+v", rep.Floor)
	}
	if s := rep.Sweep; s == nil || s.FirstDeleted != 3 || s.SteadyReqs["LIST"] != 0 || s.FirstRequests["LIST"] > s.LiveRequests["LIST"] {
		t.Errorf("sweep from the caches: %+v", rep.Sweep)
	}
	if len(rep.RSMemory) != 3 {
		t.Errorf("ReplicaSet memory points: %d, want 3 (none, 10, 10 + revisions)", len(rep.RSMemory))
	} else if last := rep.RSMemory[2]; last.Curve.N != 3 || last.Floor == nil || last.Floor.RTT.N != 3 {
		t.Errorf("the curve and the floor at the largest size: %+v, %+v", last.Curve, last.Floor)
	}
	if len(rep.Paths) != 2 {
		t.Fatalf("paths measured: %d, want 2", len(rep.Paths))
	}
	for _, p := range rep.Paths {
		if p.Paced.N != 5 || p.Paced.Lost != 0 || p.Burst.N != 5 || p.Burst.Lost != 0 {
			t.Errorf("%s: paced %+v burst %+v: want 5 each, none lost", p.Name, p.Paced, p.Burst)
		}
	}
	if rp := rep.Paths[1].Replay; rp == nil || rp.Events != 5 || rp.Cost.WritesPerEvent != 0 || rp.Failures != 0 {
		t.Errorf("replay: %+v, want 5 events and no write", rp)
	}
	if rep.Legacy == nil || rep.Legacy.Failed != 0 || rep.Legacy.Latency.Lost != 0 {
		t.Errorf("legacy: %+v", rep.Legacy)
	}
	if g := rep.GC; g == nil || g.Deleted != 3 || g.WouldDelete != 3 || g.APIDeletes != 3 {
		t.Errorf("gc: %+v, want exactly the 3 orphans deleted", g)
	}
	if len(rep.Memory) != 1 || rep.Memory[0].TinyRSS == 0 || rep.Memory[0].BigRSS == 0 || rep.Memory[0].Curve.Lost != 0 {
		t.Errorf("memory: %+v", rep.Memory)
	}
	if len(rep.Clusters) != 2 || rep.Clusters[0].RSS == 0 || rep.Clusters[1].Goroutines == 0 {
		t.Errorf("clusters: %+v, want 2 points with RSS and goroutines read", rep.Clusters)
	}
	if f := rep.Forward; f == nil || f.Local.N != 3 || f.Forwarded.N != 3 || f.Failed != 0 {
		t.Errorf("forwarding: %+v, want 3 events answered locally and 3 forwarded", rep.Forward)
	}
	if f := rep.Fleet; f == nil || len(f.Replicas) != 2 || f.Unowned != 0 || f.MultiOwned != 0 || f.Replicas[0].Owned+f.Replicas[1].Owned != 4 {
		t.Errorf("fleet: %+v, want 2 replicas owning the 3 clusters and home, each exactly once", rep.Fleet)
	}
	if l := rep.Live; l == nil || l.DuringReplay.Latency.N != 4 || l.Steady.Latency.N != 4 {
		t.Errorf("live events: %+v, want 4 attached during the replay and 4 after", rep.Live)
	}
	if len(rep.Rows) == 0 || rep.JSONPath == "" {
		t.Errorf("no table rows or JSON (%q)", rep.JSONPath)
	}
}
