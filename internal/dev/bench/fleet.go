package bench

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// FleetReplica is one replica of the fleet scenario once the fleet has settled.
type FleetReplica struct {
	Identity string `json:"identity"`
	// Owned is the sum of its configmap_attacher_cluster_owned (the home cluster counts
	// too); Shards its configmap_attacher_fleet_shards_held.
	Owned  int `json:"owned"`
	Shards int `json:"shards"`
	// RSS and Peak (VmRSS, VmHWM) and Goroutines 3 s after the fleet settled.
	RSS        int64 `json:"rssBytes"`
	Peak       int64 `json:"peakBytes"`
	Goroutines int   `json:"goroutines"`
	// ReadySeconds: process start -> /readyz 200; InSyncSeconds: process start -> the
	// first scrape from which it kept owning what it owns at the end with every one of
	// them in sync (configmap_attacher_cluster_synced).
	ReadySeconds  float64 `json:"readySeconds"`
	InSyncSeconds float64 `json:"inSyncSeconds"`
	// Released and Lost count its log's shard hand-overs to a preferred replica and
	// shards lost (a renewal missed) from its start to the end of the measurement.
	Released int `json:"released"`
	Lost     int `json:"lost"`
}

// FleetResult is FleetReplicas `serve --fleet --watch` processes sharing Clusters idle
// Argo CD clusters (and the home cluster).
type FleetResult struct {
	Clusters int             `json:"clusters"`
	Replicas []*FleetReplica `json:"replicas"`
	// Unowned and MultiOwned count the clusters (home included) whose owners, summed over
	// the replicas, are 0 or more than 1 at the end (both 0: every cluster one owner).
	Unowned    int `json:"unowned"`
	MultiOwned int `json:"multiOwned"`
	// SettledSeconds: the first process start -> the fleet's last change before it held
	// still for fleetQuiet.
	SettledSeconds float64 `json:"settledSeconds"`
	// MovedAfter: the owners changed between the settled scrape and one taken after the
	// replicas were read (the fleet was not settled after all).
	MovedAfter bool `json:"movedAfter"`
}

const (
	fleetSecrets = "bench-argocd-fleet"
	fleetLeases  = "bench-fleet-scale"
	fleetHome    = "bench-fl-home"
	// fleetQuiet is how long the fleet's ownership and sync state must hold still to be
	// called settled (the start-up hand-over of shards to their preferred replicas takes
	// two retry periods after a preferred replica is seen: 4 s).
	fleetQuiet = 10 * time.Second
)

// fleet runs FleetReplicas replicas over FleetClusters idle clusters, each replica with
// the watcher, and reads every replica once the fleet has settled.
func (e *env) fleet(ctx context.Context, rep *Report) error {
	f := &clusterFleet{e: e, secrets: fleetSecrets, prefix: "bench-fl-"}
	defer f.close()
	for _, ns := range []string{fleetLeases, fleetHome} {
		if err := e.ensureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := f.grow(ctx, e.cfg.FleetClusters); err != nil {
		return err
	}
	e.cfg.Logf("   fleet: %d clusters in place (%s)", e.cfg.FleetClusters, time.Since(start).Round(time.Second))
	reps, err := e.startFleet(ctx, e.cfg.FleetReplicas)
	defer func() {
		for _, s := range reps {
			s.stop()
		}
	}()
	if err != nil {
		return err
	}
	r, settled, err := settleFleet(ctx, reps, e.cfg.FleetClusters)
	if err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	for i, s := range reps {
		if err := readReplica(ctx, s, r.Replicas[i]); err != nil {
			return err
		}
		fr := r.Replicas[i]
		e.cfg.Logf("   fleet: %s owns %d clusters (%d shards): RSS %s (peak %s), %d goroutines, ready %.1fs, in sync %.1fs, %d released, %d lost",
			fr.Identity, fr.Owned, fr.Shards, mib(fr.RSS), mib(fr.Peak), fr.Goroutines, fr.ReadySeconds, fr.InSyncSeconds, fr.Released, fr.Lost)
	}
	after, err := scrapeFleet(ctx, reps)
	if err != nil {
		return err
	}
	for i := range reps {
		r.MovedAfter = r.MovedAfter || after.state[i] != settled.state[i]
	}
	rep.Fleet = r
	return nil
}

// readReplica reads s's RSS, goroutines and shard hand-overs into fr.
func readReplica(ctx context.Context, s *service, fr *FleetReplica) error {
	var err error
	if fr.RSS, fr.Peak, err = s.rss(); err != nil {
		return err
	}
	g, err := s.scrape(ctx, "go_goroutines")
	if err != nil {
		return err
	}
	fr.Goroutines = int(g)
	b, err := os.ReadFile(s.logFile)
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	fr.Released, fr.Lost = strings.Count(string(b), "shard released to its preferred replica"), strings.Count(string(b), "shard lost")
	return nil
}

// startFleet starts n replicas at once and returns them once each answers /readyz (the
// started ones also on error, for the caller to stop).
func (e *env) startFleet(ctx context.Context, n int) ([]*service, error) {
	reps := make([]*service, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reps[i], errs[i] = e.startReplica(ctx, i, "")
			if errors.Is(errs[i], errAddrInUse) {
				// Its fleet port was taken (startService picks the others again itself).
				reps[i], errs[i] = e.startReplica(ctx, i, "-again")
			}
		}()
	}
	wg.Wait()
	var started []*service
	for _, s := range reps {
		if s != nil {
			started = append(started, s)
		}
	}
	return started, errors.Join(errs...)
}

// startReplica starts fleet replica rI on free ports; suffix names a second attempt's log.
func (e *env) startReplica(ctx context.Context, i int, suffix string) (*service, error) {
	port, err := controlplane.FreePort()
	if err != nil {
		return nil, err
	}
	id := fmt.Sprintf("r%d", i)
	args := []string{"--argocd-clusters", fleetSecrets, "--watch", "--watch-namespace", fleetHome, "--gc-interval", "10m",
		"--max-clusters", "10000", "--log-level", "info",
		"--fleet", "--fleet-namespace", fleetLeases, "--fleet-identity", id, "--fleet-addr", fmt.Sprintf("127.0.0.1:%d", port)}
	if e.cfg.FleetShards > 0 {
		args = append(args, "--fleet-shards", fmt.Sprint(e.cfg.FleetShards))
	}
	return e.startService(ctx, "fleet-scale-"+id+suffix, args...)
}

// fleetView is one scrape of every replica: per replica the clusters it owns and how
// many of them are in sync (state), its shards, and the owners of each cluster summed
// over the replicas.
type fleetView struct {
	state  []string
	owned  []int
	shards []int
	owners map[string]int
	synced bool // every replica has every cluster it owns in sync
}

func scrapeFleet(ctx context.Context, reps []*service) (*fleetView, error) {
	v := &fleetView{owners: map[string]int{}, synced: true}
	for _, s := range reps {
		owned, err := s.samples(ctx, "configmap_attacher_cluster_owned")
		if err != nil {
			return nil, err
		}
		synced, err := s.samples(ctx, "configmap_attacher_cluster_synced")
		if err != nil {
			return nil, err
		}
		shards, _ := s.scrape(ctx, "configmap_attacher_fleet_shards_held")
		o, in := 0, 0
		set := fnv.New64a()
		for _, labels := range slices.Sorted(maps.Keys(owned)) {
			v.owners[labels] += int(owned[labels])
			if owned[labels] == 1 {
				o++
				in += int(synced[labels])
				_, _ = set.Write([]byte(labels))
			}
		}
		v.synced = v.synced && in == o
		v.state = append(v.state, fmt.Sprintf("%d/%d/%x", o, in, set.Sum64()))
		v.owned, v.shards = append(v.owned, o), append(v.shards, int(shards))
	}
	return v, nil
}

// settleFleet scrapes the replicas every 500 ms until each has every cluster it owns in
// sync, all n+1 clusters are registered, and nothing changed for fleetQuiet (the owners
// per cluster are then read, not waited for); it gives up after 5 minutes.
func settleFleet(ctx context.Context, reps []*service, n int) (*FleetResult, *fleetView, error) {
	since := make([]time.Time, len(reps))
	var last *fleetView
	var changed time.Time
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		v, err := scrapeFleet(ctx, reps)
		if err != nil {
			return nil, nil, err
		}
		now := time.Now()
		for i := range reps {
			if last == nil || v.state[i] != last.state[i] {
				since[i], changed = now, now
			}
			if last != nil && v.shards[i] != last.shards[i] {
				changed = now
			}
		}
		last = v
		if v.synced && len(v.owners) == n+1 && now.Sub(changed) >= fleetQuiet {
			return fleetResult(reps, v, since, n), v, nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	if last == nil {
		return nil, nil, fmt.Errorf("fleet: not scraped: %w", ctx.Err())
	}
	return nil, nil, fmt.Errorf("fleet did not settle in 5m: replicas owned/synced/set %s, shards %v, %d clusters seen, %d unowned, %d with several owners",
		strings.Join(last.state, " "), last.shards, len(last.owners), last.unowned(), last.multiOwned())
}

func (v *fleetView) unowned() (k int) {
	for _, o := range v.owners {
		if o == 0 {
			k++
		}
	}
	return k
}

func (v *fleetView) multiOwned() (k int) {
	for _, o := range v.owners {
		if o > 1 {
			k++
		}
	}
	return k
}

func fleetResult(reps []*service, v *fleetView, since []time.Time, n int) *FleetResult {
	r := &FleetResult{Clusters: n, Unowned: v.unowned(), MultiOwned: v.multiOwned()}
	first := reps[0].startedAt
	for i, s := range reps {
		if s.startedAt.Before(first) {
			first = s.startedAt
		}
		r.Replicas = append(r.Replicas, &FleetReplica{Identity: fmt.Sprintf("r%d", i), Owned: v.owned[i], Shards: v.shards[i],
			ReadySeconds: s.readyAt.Sub(s.startedAt).Seconds(), InSyncSeconds: since[i].Sub(s.startedAt).Seconds()})
	}
	latest := since[0]
	for _, t := range since {
		if t.After(latest) {
			latest = t
		}
	}
	r.SettledSeconds = latest.Sub(first).Seconds()
	return r
}

// fleetRows are the fleet scenario's rows, beside one replica's per-cluster figures.
func (r *Report) fleetRows(add func(fig, meas, base, target, met string)) {
	f := r.Fleet
	if f == nil {
		return
	}
	base := "-"
	if n := len(r.Clusters); n > 0 {
		c := r.Clusters[n-1]
		base = fmt.Sprintf("one replica, %d clusters: %s, %d goroutines, in sync %.1fs", c.Clusters, mib(c.RSS), c.Goroutines, c.ReadySeconds)
	}
	worstRSS, worstSync := int64(0), 0.0
	for _, x := range f.Replicas {
		worstRSS, worstSync = max(worstRSS, x.RSS), max(worstSync, x.InSyncSeconds)
		add(fmt.Sprintf("fleet of %d, %d clusters: replica %s: owned (shards), RSS (peak), goroutines, ready, all owned in sync (hand-overs, lost)",
			len(f.Replicas), f.Clusters, x.Identity),
			fmt.Sprintf("%d (%d), %s (%s), %d, %.1fs, %.1fs (%d, %d)", x.Owned, x.Shards, mib(x.RSS), mib(x.Peak), x.Goroutines, x.ReadySeconds,
				x.InSyncSeconds, x.Released, x.Lost),
			base, "< 300 MiB, in sync < 60 s", yesNo(x.RSS < 300<<20 && x.InSyncSeconds < 60))
	}
	add(fmt.Sprintf("fleet of %d, %d clusters + home: clusters with no owner / several owners (owned summed over replicas)", len(f.Replicas), f.Clusters),
		fmt.Sprintf("%d / %d (settled %.1fs after the first start%s; worst replica %s, in sync %.1fs)", f.Unowned, f.MultiOwned, f.SettledSeconds,
			map[bool]string{true: ", owners moved after", false: ""}[f.MovedAfter], mib(worstRSS), worstSync),
		"-", "every cluster exactly one owner", yesNo(f.Unowned == 0 && f.MultiOwned == 0))
}
