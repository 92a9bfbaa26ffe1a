package bench

import (
	"context"
	"fmt"
	"time"
)

// MemPoint is serve's memory with Objects ConfigMaps in the namespace it caches, tiny and
// of MemBigBytes each, and the watcher path's latency at that size.
type MemPoint struct {
	Objects  int   `json:"objects"`
	TinyRSS  int64 `json:"tinyRSSBytes"`
	BigRSS   int64 `json:"bigRSSBytes"`
	TinyHWM  int64 `json:"tinyPeakBytes"`
	BigHWM   int64 `json:"bigPeakBytes"`
	BigBytes int   `json:"bigBytes"`
	// Curve: CurveN ReplicaSets at Rate through the watcher with Objects revisions cached.
	Curve runResult `json:"curve"`
	// ReadySeconds is how long serve took to become ready (initial lists) with big objects.
	TinyReadySeconds float64 `json:"tinyReadySeconds"`
	BigReadySeconds  float64 `json:"bigReadySeconds"`
}

// memory measures serve's RSS at each level of MemLevels with tiny and big ConfigMaps,
// and the watcher latency at that level (the scaling curve).
func (e *env) memory(ctx context.Context, rep *Report) error {
	tiny, big := "bench-mem-tiny", "bench-mem-big"
	for _, ns := range []string{tiny, big} {
		if err := e.ensureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	have := 0
	for _, level := range e.cfg.MemLevels {
		if level < have {
			continue
		}
		start := time.Now()
		if err := e.createRevisions(ctx, tiny, "tiny", have, level, 0); err != nil {
			return err
		}
		if err := e.createRevisions(ctx, big, "big", have, level, e.cfg.MemBigBytes); err != nil {
			return err
		}
		// The curve's own revisions (not counted in the level).
		if err := e.createRevisions(ctx, tiny, fmt.Sprintf("curve%d", level), 0, e.cfg.CurveN, 0); err != nil {
			return err
		}
		have = level
		e.cfg.Logf("   memory: %d tiny + %d ConfigMaps of %d KiB in place (%s)", level, level, e.cfg.MemBigBytes>>10, time.Since(start).Round(time.Second))
		p := &MemPoint{Objects: level, BigBytes: e.cfg.MemBigBytes}
		measure := func(ns string, rss, hwm *int64, ready *float64, curve bool) error {
			svc, err := e.startService(ctx, fmt.Sprintf("mem-%s-%d", ns, level), "--watch", "--watch-namespace", ns)
			if err != nil {
				return err
			}
			defer svc.stop()
			*ready = time.Since(svc.startedAt).Seconds()
			time.Sleep(3 * time.Second) // let the initial lists' garbage go
			if *rss, *hwm, err = svc.rss(); err != nil {
				return err
			}
			if !curve || e.cfg.CurveN <= 0 {
				return nil
			}
			t, err := e.track(ctx, ns)
			if err != nil {
				return err
			}
			defer t.stop()
			prefix := fmt.Sprintf("curve%d", level)
			names, err := e.createReplicaSets(ctx, t, ns, prefix+"-rs", prefix, 0, e.cfg.CurveN, e.cfg.Rate, 0)
			if err != nil {
				return err
			}
			p.Curve = t.result(names)
			return nil
		}
		if err := measure(tiny, &p.TinyRSS, &p.TinyHWM, &p.TinyReadySeconds, true); err != nil {
			return err
		}
		if err := measure(big, &p.BigRSS, &p.BigHWM, &p.BigReadySeconds, false); err != nil {
			return err
		}
		rep.Memory = append(rep.Memory, p)
		e.cfg.Logf("   memory at %d: tiny %s, big %s; watcher p50/p95/p99 %s", level, mib(p.TinyRSS), mib(p.BigRSS), p.Curve.Latency)
	}
	return nil
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
