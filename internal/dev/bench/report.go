package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is everything one run measured.
type Report struct {
	Started   time.Time     `json:"started"`
	Finished  time.Time     `json:"finished"`
	CPUs      int           `json:"cpus"`
	LoadStart string        `json:"loadStart"`
	LoadEnd   string        `json:"loadEnd"`
	Quick     bool          `json:"quick"`
	Config    Config        `json:"config"`
	Floor     *FloorResult  `json:"floor,omitempty"`
	Paths     []*PathResult `json:"paths,omitempty"`
	// SensorAlone: argo-grpc's pipeline with a no-op trigger (clock: Create -> Execute).
	SensorAlone *PathResult   `json:"sensorAlone,omitempty"`
	Legacy      *LegacyResult `json:"legacy,omitempty"`
	// K8sOther: the argo-k8s semantics cases under the other patch strategy.
	K8sOther *K8sVariant `json:"k8sOtherStrategy,omitempty"`
	GC       *GCResult   `json:"gc,omitempty"`
	Memory   []*MemPoint `json:"memory,omitempty"`
	// RSMemory: serve with ReplicaSets cached (the first point has none); Sweep: the
	// orphan sweep over many namespaces from the caches.
	RSMemory []*RSMemPoint `json:"rsMemory,omitempty"`
	Sweep    *SweepScale   `json:"sweep,omitempty"`
	// Clusters: one replica serving idle clusters; Forward: the fleet's forwarded events.
	Clusters []*ClusterPoint `json:"clusters,omitempty"`
	Forward  *ForwardResult  `json:"forward,omitempty"`
	// Fleet: replicas sharing many clusters; Live: events sent during the start-up replay.
	Fleet    *FleetResult `json:"fleet,omitempty"`
	Live     *LiveResult  `json:"live,omitempty"`
	Errors   []string     `json:"errors,omitempty"`
	Rows     []Row        `json:"rows"`
	LogDir   string       `json:"logDir"`
	JSONPath string       `json:"-"`
}

// Row is one line of the table: a figure next to its same-run baseline and target.
type Row struct {
	Figure   string `json:"figure"`
	Measured string `json:"measured"`
	Baseline string `json:"baseline"`
	Target   string `json:"target"`
	// Met is "yes", "NO" or "" (no target).
	Met string `json:"met"`
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func (r *Report) path(name string) *PathResult {
	for _, p := range r.Paths {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// build fills Rows from the results.
func (r *Report) build() {
	add := func(fig, meas, base, target, met string) {
		r.Rows = append(r.Rows, Row{Figure: fig, Measured: meas, Baseline: base, Target: target, Met: met})
	}
	floorP99 := math.NaN()
	floorStr := "n/a"
	if f := r.Floor; f != nil {
		floorP99 = f.RTT.P99
		floorStr = "PATCH " + f.RTT.String()
		add(fmt.Sprintf("floor: bare PATCH RTT, warm client (n=%d) p50/p95/p99", f.RTT.N), f.RTT.String(), "-", "-", "")
		add("floor: PATCH start -> seen by a watch p50/p95/p99", f.Visible.String(), "-", "-", "")
	}
	for _, p := range r.Paths {
		target, met := "-", ""
		switch p.Name {
		case "watcher":
			target = "p50, p99 <= 3x floor"
			if f := r.Floor; f != nil && p.Paced.Latency.N > 0 {
				target = fmt.Sprintf("p50 <= %s, p99 <= %s (3x floor)", fmtMs(3*f.RTT.P50), fmtMs(3*floorP99))
				met = yesNo(p.Paced.Latency.P50 <= 3*f.RTT.P50 && p.Paced.Latency.P99 <= 3*floorP99 && p.Paced.Lost == 0)
			}
		case "eventbus":
			target = "p99 < 5x floor"
			if !math.IsNaN(floorP99) && p.Paced.Latency.N > 0 {
				target = fmt.Sprintf("p99 < %s (5x floor)", fmtMs(5*floorP99))
				met = yesNo(p.Paced.Latency.P99 < 5*floorP99 && p.Paced.Lost == 0)
			}
		}
		add(fmt.Sprintf("%s: RS create -> owner seen, %d at %.0f/s, p50/p95/p99 (lost)", p.Name, p.Paced.N, p.Rate),
			fmt.Sprintf("%s (lost %d)", p.Paced.Latency, p.Paced.Lost), floorStr, target, met)
		if p.Burst.N > 0 {
			b := p.Burst
			add(fmt.Sprintf("%s: burst of %d, created/s -> attached/s, lag p99, drain (lost)", p.Name, b.N),
				fmt.Sprintf("%.0f/s -> %.0f/s, lag p99 %s, drain %s (lost %d)", b.CreateRate, b.AttachRate, fmtMs(b.Latency.P99), fmtMs(b.DrainMs), b.Lost),
				fmt.Sprintf("apiserver create rate %.0f/s", b.CreateRate), "drain < 0.5s, 0 lost",
				yesNo(b.Lost == 0 && b.DrainMs < 500))
		}
		c := p.Cost
		add(fmt.Sprintf("%s: per event: writes, Event records, GETs, LISTs", p.Name),
			fmt.Sprintf("%.2f, %.2f, %.2f, %.2f", c.WritesPerEvent, c.RecordsPerEvent, c.GetsPerEvent, c.ListsPerEvent),
			floorCost(r.Floor), "1 write, 1 GET (the live confirm)", yesNo(c.WritesPerEvent <= 1.0001 && c.GetsPerEvent <= 1.0001))
		if k := p.Semantics; k != nil {
			add(fmt.Sprintf("%s: semantics (%s), observed", p.Name, shortPatch(p.PatchStrategy)), k.Summary(),
				"serve: adds, opt-in label required, missing reported, gone RS refused (rules 2-4)", "-", "")
		}
		if k := r.K8sOther; k != nil && p.Name == "argo-k8s" {
			add(fmt.Sprintf("%s: semantics (%s), observed", p.Name, shortPatch(k.PatchStrategy)), k.Semantics.Summary(),
				"serve: adds, opt-in label required, missing reported, gone RS refused (rules 2-4)", "-", "")
		}
		if rp := p.Replay; rp != nil {
			add(fmt.Sprintf("replay of %d ADD events (attached RS), via %s: writes, GETs", rp.Events, p.Name),
				fmt.Sprintf("%.0f writes, %.0f GETs, %.1fs, %d failed", rp.Cost.WritesPerEvent*float64(rp.Events),
					rp.Cost.GetsPerEvent*float64(rp.Events), rp.Seconds, rp.Failures), "-", "0 writes",
				yesNo(rp.Cost.WritesPerEvent == 0 && rp.Failures == 0))
		}
		if p.Name == "argo-grpc" {
			r.sensorAloneRows(add, p)
		}
	}
	if r.path("argo-grpc") == nil {
		r.sensorAloneRows(add, nil)
	}
	if l := r.Legacy; l != nil {
		w := r.path("watcher")
		base := "-"
		if w != nil {
			base = "watcher " + w.Paced.Latency.String()
		}
		add(fmt.Sprintf("old one-shot Job, fresh process per deploy (n=%d): RS create -> owner seen", l.N),
			fmt.Sprintf("%s (failed %d)", l.Latency.Latency, l.Failed), base, "-", "")
		add("old one-shot Job: requests per deploy: GETs, LISTs, writes", fmt.Sprintf("%.1f, %.1f, %.1f (process p50 %s)",
			l.Cost.GetsPerEvent, l.Cost.ListsPerEvent, l.Cost.WritesPerEvent, fmtMs(l.Process.P50)), "-", "-", "")
	}
	if g := r.GC; g != nil {
		add(fmt.Sprintf("GC sweep: %d revisions, %d RS, %d true orphans: time (dry run)", g.Revisions, g.ReplicaSets, g.TrueOrphans),
			fmt.Sprintf("%.2fs (dry run %.2fs)", g.SweepSeconds, g.DryRunSeconds), fmt.Sprintf("one plan (all lists) %.2fs", g.PlanSeconds), "< 2s", yesNo(g.SweepSeconds < 2))
		if g.DeleteSeconds > 0 {
			add("GC sweep: where the time goes: plan + confirm plan, deletes",
				fmt.Sprintf("plans %.2fs, %d deletes %.2fs (%d in flight, %.0f/s)", g.SweepSeconds-g.DeleteSeconds, g.Deleted, g.DeleteSeconds, g.Parallel,
					float64(g.Deleted)/g.DeleteSeconds), fmt.Sprintf("client QPS %.0f", g.ClientQPS), "-", "")
		}
		add("GC sweep: deletes (apiserver DELETEs) vs true orphans; client requests",
			fmt.Sprintf("%d (%.0f) of %d; %s", g.Deleted, g.APIDeletes, g.TrueOrphans, fmtReq(g.Requests)), fmt.Sprintf("dry run: %d would go", g.WouldDelete),
			"writes == true orphans", yesNo(g.Deleted == g.TrueOrphans && int(g.APIDeletes) == g.TrueOrphans && g.WouldDelete == g.TrueOrphans))
	}
	r.scaleRows(add, floorStr)
	r.clusterRows(add)
	r.fleetRows(add)
	r.liveRows(add)
	for _, m := range r.Memory {
		diff := 0.0
		if m.TinyRSS > 0 {
			diff = float64(m.BigRSS-m.TinyRSS) / float64(m.TinyRSS) * 100
		}
		add(fmt.Sprintf("serve RSS, %d ConfigMaps of %d KiB vs tiny", m.Objects, m.BigBytes>>10),
			fmt.Sprintf("%s (%+.1f%%, ready %.1fs)", mib(m.BigRSS), diff, m.BigReadySeconds),
			fmt.Sprintf("tiny %s (ready %.1fs)", mib(m.TinyRSS), m.TinyReadySeconds), "within 10%, < 150 MiB",
			yesNo(math.Abs(diff) <= 10 && m.BigRSS < 150<<20 && m.TinyRSS < 150<<20))
		if m.Curve.N > 0 {
			add(fmt.Sprintf("curve: watcher, %d revisions cached, %d RS p50/p95/p99 (lost)", m.Objects, m.Curve.N),
				fmt.Sprintf("%s (lost %d)", m.Curve.Latency, m.Curve.Lost), floorStr, "flat in object count", "")
		}
	}
}

// scaleRows are the rows of the ReplicaSet memory curve and the sweep from the caches.
func (r *Report) scaleRows(add func(fig, meas, base, target, met string), floorStr string) {
	var base *RSMemPoint
	for _, m := range r.RSMemory {
		if m.ReplicaSets == 0 {
			base = m
			continue
		}
		fig := fmt.Sprintf("serve --watch RSS, %d ReplicaSets (3 KiB templates)", m.ReplicaSets)
		if r.Config.GoMemLimit != "" {
			fig = fmt.Sprintf("serve --watch RSS (GOMEMLIMIT %s), %d ReplicaSets (3 KiB templates)", r.Config.GoMemLimit, m.ReplicaSets)
		}
		target, met := "-", ""
		if m.Revisions > 0 {
			fig += fmt.Sprintf(" + %d revisions", m.Revisions)
			target, met = "< 200 MiB", yesNo(m.RSS < 200<<20)
		}
		baseStr := "-"
		if base != nil {
			baseStr = fmt.Sprintf("none cached %s", mib(base.RSS))
		}
		per := fmt.Sprintf("%.0f B per RS", m.BytesPerRS)
		if m.Revisions > 0 {
			per = fmt.Sprintf("%.0f B per revision", m.BytesPerRevision)
		}
		add(fig, fmt.Sprintf("%s after start-up (%s at ready+3s, peak %s), %s", mib(m.RSS), mib(m.ReadyRSS), mib(m.Peak), per), baseStr, target, met)
		add(fmt.Sprintf("start-up: serve ready with %d RS + %d revisions (start-up replay done)", m.ReplicaSets, m.Revisions),
			fmt.Sprintf("%.1fs (%.1fs)", m.ReadySeconds, m.DoneSeconds), "-", "< 10s", yesNo(m.ReadySeconds < 10))
		if m.Curve.N > 0 {
			base, target, met := floorStr, "does not grow with the cluster", ""
			if f := m.Floor; f != nil && f.RTT.N > 0 {
				base = "PATCH at this size " + f.RTT.String()
				target = fmt.Sprintf("p50 <= %s, p99 <= %s (3x floor at this size)", fmtMs(3*f.RTT.P50), fmtMs(3*f.RTT.P99))
				met = yesNo(m.Curve.Latency.P50 <= 3*f.RTT.P50 && m.Curve.Latency.P99 <= 3*f.RTT.P99 && m.Curve.Lost == 0)
			}
			add(fmt.Sprintf("curve: watcher with %d RS + %d revisions cached, %d RS p50/p95/p99 (lost)", m.ReplicaSets, m.Revisions, m.Curve.N),
				fmt.Sprintf("%s (lost %d)", m.Curve.Latency, m.Curve.Lost), base, target, met)
		}
	}
	if s := r.Sweep; s != nil {
		size := fmt.Sprintf("%d ns x %d RS x %d revisions", s.Namespaces, s.ReplicaSetsPerNS, s.RevisionsPerNS)
		add("sweep from caches, steady state, "+size+": requests, time", fmt.Sprintf("%s, %.2fs", fmtReq(s.SteadyReqs), s.SteadySeconds),
			fmt.Sprintf("live lists (dry run): %s, %.2fs", fmtReq(s.LiveRequests), s.LiveSeconds), "0 LISTs", yesNo(s.SteadyReqs["LIST"] == 0))
		add(fmt.Sprintf("sweep from caches, %d orphans: requests, time", s.Namespaces), fmt.Sprintf("%s, %.2fs, %d deleted", fmtReq(s.FirstRequests), s.FirstSeconds, s.FirstDeleted),
			"-", "LISTs only to confirm deletes (<= one live plan), 1 GET + 1 DELETE per orphan",
			yesNo(s.FirstRequests["LIST"] <= s.LiveRequests["LIST"] && s.FirstDeleted == s.Namespaces && s.FirstRequests["GET"] == s.Namespaces && s.FirstRequests["DELETE"] == s.Namespaces))
	}
}

// clusterRows are the per-cluster cost of one replica and the fleet's forwarded events.
func (r *Report) clusterRows(add func(fig, meas, base, target, met string)) {
	var first *ClusterPoint
	for _, c := range r.Clusters {
		if first == nil {
			first = c
		}
		add(fmt.Sprintf("clusters: one replica, %d idle Argo CD clusters + home: RSS, goroutines, all in sync", c.Clusters),
			fmt.Sprintf("%s (peak %s), %d goroutines, %.1fs", mib(c.RSS), mib(c.HWM), c.Goroutines, c.ReadySeconds), "-", "-", "")
		if c == first {
			continue
		}
		add(fmt.Sprintf("clusters: per idle cluster, %d against %d: bytes, goroutines", c.Clusters, first.Clusters),
			fmt.Sprintf("%s, %.0f goroutines", mib(int64(c.BytesPerCluster)), c.GoroutinesPerCluster),
			fmt.Sprintf("%d clusters: %s, %d goroutines", first.Clusters, mib(first.RSS), first.Goroutines),
			"< 1 MiB, < 20 goroutines (issue 26)", yesNo(c.BytesPerCluster < 1<<20 && c.GoroutinesPerCluster < 20))
	}
	if f := r.Forward; f != nil {
		add(fmt.Sprintf("fleet of 2, %d clusters: HTTP event forwarded to the owner, POST -> answer p50/p95/p99 (failed)", f.Clusters),
			fmt.Sprintf("%s (failed %d)", f.Forwarded, f.Failed), "sent to the owner: "+f.Local.String(), "forwarded p99 <= 2x local p99",
			yesNo(f.Forwarded.N > 0 && f.Forwarded.P99 <= 2*f.Local.P99))
	}
}

func shortPatch(s string) string {
	switch s {
	case "application/merge-patch+json":
		return "merge patch"
	case "application/strategic-merge-patch+json":
		return "strategic merge patch"
	}
	return s
}

func floorCost(f *FloorResult) string {
	if f == nil {
		return "-"
	}
	return fmt.Sprintf("floor: %.2f writes, %.2f GETs", f.Cost.WritesPerEvent, f.Cost.GetsPerEvent)
}

func fmtReq(m map[string]int) string {
	var parts []string
	for _, v := range []string{"LIST", "GET", "WATCH", "POST", "PUT", "PATCH", "DELETE"} {
		if m[v] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", v, m[v]))
		}
	}
	if len(parts) == 0 {
		return "0 requests"
	}
	return strings.Join(parts, ", ")
}

// Table renders the report as one aligned table with a header naming the machine load.
func (r *Report) Table() string {
	var b strings.Builder
	mode := "full"
	if r.Quick {
		mode = "BENCH_QUICK"
	}
	fmt.Fprintf(&b, "configmap-attacher bench (%s), %s, %d CPUs, load avg %s at start / %s at end, %s\n", mode,
		r.Started.Format(time.RFC3339), r.CPUs, r.LoadStart, r.LoadEnd, r.Finished.Sub(r.Started).Round(time.Second))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FIGURE\tMEASURED\tBASELINE (same run)\tTARGET\tMET")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row.Figure, row.Measured, row.Baseline, row.Target, row.Met)
	}
	_ = tw.Flush()
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "ERROR: %s\n", e)
	}
	return b.String()
}

// Markdown renders the rows as a Markdown table (for bench/README.md).
func (r *Report) Markdown() string {
	var b strings.Builder
	b.WriteString("| figure | measured | baseline (same run) | target | met |\n|---|---|---|---|---|\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", row.Figure, row.Measured, row.Baseline, row.Target, row.Met)
	}
	return b.String()
}

// WriteJSON writes the report to dir/bench-<time>.json and dir/latest.json.
func (r *Report) WriteJSON(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("results dir: %w", err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encoding the report: %w", err)
	}
	name := "bench-" + r.Started.Format("20060102T150405Z")
	if r.Quick {
		name += "-quick"
	}
	path := filepath.Join(dir, name+".json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", fmt.Errorf("writing the report: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "latest.json"), b, 0o644); err != nil {
		return "", fmt.Errorf("writing the report: %w", err)
	}
	return path, nil
}

// sensorAloneRows put the no-op trigger's figures beside argo-grpc's (g; nil if it did
// not run): if they are about the same, the Argo Events pipeline sets the pace.
func (r *Report) sensorAloneRows(add func(fig, meas, base, target, met string), g *PathResult) {
	s := r.SensorAlone
	if s == nil {
		return
	}
	paced, burst := "-", "-"
	if g != nil {
		paced = "argo-grpc " + g.Paced.Latency.String()
		burst = fmt.Sprintf("argo-grpc %.0f/s -> %.0f/s, drain %s", g.Burst.CreateRate, g.Burst.AttachRate, fmtMs(g.Burst.DrainMs))
	}
	add(fmt.Sprintf("argo-grpc: sensor alone (no-op trigger): RS create -> Execute, %d at %.0f/s, p50/p95/p99 (lost)", s.Paced.N, s.Rate),
		fmt.Sprintf("%s (lost %d)", s.Paced.Latency, s.Paced.Lost), paced, "-", "")
	if b := s.Burst; b.N > 0 {
		add(fmt.Sprintf("argo-grpc: sensor alone (no-op trigger): burst of %d, created/s -> triggered/s, lag p99, drain (lost)", b.N),
			fmt.Sprintf("%.0f/s -> %.0f/s, lag p99 %s, drain %s (lost %d)", b.CreateRate, b.AttachRate, fmtMs(b.Latency.P99), fmtMs(b.DrainMs), b.Lost),
			burst, "-", "")
	}
}
