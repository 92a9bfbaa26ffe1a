package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LiveRun is LiveN fresh ReplicaSets' ADD events POSTed to the HTTP receiver, liveSenders
// at once, each right after its ReplicaSet's Create returned; a 429 or 503 answer is
// retried after 100 ms (as a sender honouring Retry-After would, sooner). Clock: first
// POST -> the 2xx answer, which comes after the attach.
type LiveRun struct {
	Latency Latency `json:"latency"`
	// InSync and Starting split Latency by the event's cluster at the first POST: its
	// caches in sync (configmap_attacher_cluster_synced, read every 200 ms), or still
	// starting (the event waits for them: cluster start-ups are bounded, docs/design.md
	// "Per-cluster cost").
	InSync   Latency `json:"inSync"`
	Starting Latency `json:"starting"`
	// Busy and Unavailable count the 429 and 503 answers (each retried); Failed the
	// events without a 2xx answer after 30 s or with another status; NotAttached the 2xx
	// answers that do not say the ConfigMap is attached.
	Busy        int `json:"busy"`
	Unavailable int `json:"unavailable"`
	Failed      int `json:"failed"`
	NotAttached int `json:"notAttached"`
	// Seconds: the first Create -> the last answer.
	Seconds float64 `json:"seconds"`
}

// LiveResult is one replica serving Clusters clusters whose start-up replay has
// ReplicaSets x Clusters attaches to make, and fresh events sent the moment /readyz
// answers (DuringReplay) and once every cluster's replay is done (Steady, the baseline).
type LiveResult struct {
	Clusters    int `json:"clusters"`
	ReplicaSets int `json:"replicaSetsPerCluster"`
	// ReadySeconds: process start -> /readyz 200; DoneSeconds: -> every cluster's
	// "start-up done" (its watchers' start-up replays handled).
	ReadySeconds float64 `json:"readySeconds"`
	DoneSeconds  float64 `json:"doneSeconds"`
	DuringReplay LiveRun `json:"duringReplay"`
	Steady       LiveRun `json:"steady"`
}

const (
	liveSecrets = "bench-argocd-live"
	liveHome    = "bench-lv-home"
	liveSenders = 16
)

// liveDuringReplay fills LiveClusters clusters (none served yet) with LiveRS realistic
// ReplicaSets each referencing an unattached revision, starts serve --watch over them,
// and sends LiveN fresh events at /readyz and LiveN more once the replays are done.
func (e *env) liveDuringReplay(ctx context.Context, rep *Report) error {
	f := &clusterFleet{e: e, secrets: liveSecrets, prefix: "bench-lv-"}
	defer f.close()
	if err := e.ensureNamespace(ctx, liveHome); err != nil {
		return err
	}
	n, k := e.cfg.LiveClusters, e.cfg.LiveRS
	start := time.Now()
	if err := f.grow(ctx, n); err != nil {
		return err
	}
	if err := e.fillLive(ctx, f, n, k); err != nil {
		return err
	}
	e.cfg.Logf("   live: %d clusters x %d ReplicaSets and revisions in place (%s)", n, k, time.Since(start).Round(time.Second))
	svc, err := e.startService(ctx, "live", "--argocd-clusters", liveSecrets, "--watch", "--watch-namespace", liveHome,
		"--gc-interval", "10m", "--max-clusters", "10000", "--log-level", "info")
	if err != nil {
		return err
	}
	defer svc.stop()
	r := &LiveResult{Clusters: n, ReplicaSets: k, ReadySeconds: svc.readyAt.Sub(svc.startedAt).Seconds()}
	done := make(chan float64, 1)
	go func() {
		var at float64
		if svc.waitLogCount(ctx, startupDone, n+1, 10*time.Minute) { // the home cluster too
			at = time.Since(svc.startedAt).Seconds()
		}
		done <- at
	}()
	r.DuringReplay = e.sendLive(ctx, f, svc, "zlive")
	e.cfg.Logf("   live: during the replay %s (cluster in sync %s, starting %s), %d busy, %d unavailable, %d failed", r.DuringReplay.Latency,
		r.DuringReplay.InSync, r.DuringReplay.Starting, r.DuringReplay.Busy, r.DuringReplay.Unavailable, r.DuringReplay.Failed)
	if r.DoneSeconds = <-done; r.DoneSeconds == 0 {
		return fmt.Errorf("live: the start-up replays were not done within 10m\n%s", tail(svc.logFile, 10))
	}
	time.Sleep(3 * time.Second)
	r.Steady = e.sendLive(ctx, f, svc, "zsteady")
	e.cfg.Logf("   live: ready %.1fs, replays done %.1fs; steady %s, %d busy, %d unavailable, %d failed", r.ReadySeconds,
		r.DoneSeconds, r.Steady.Latency, r.Steady.Busy, r.Steady.Unavailable, r.Steady.Failed)
	rep.Live = r
	return nil
}

// fillLive creates, in each of the n clusters' namespaces, k realistic ReplicaSets
// rs-I each referencing the unattached revision rev-I, and the revisions the live
// events' ReplicaSets will reference (zlive-J and zsteady-J, J of this cluster).
func (e *env) fillLive(ctx context.Context, f *clusterFleet, n, k int) error {
	return parallel(ctx, 0, n*k+2*e.cfg.LiveN, 16, func(ctx context.Context, i int) error {
		var ns, rev, rs string
		switch j := i - n*k; {
		case j < 0:
			ns, rev, rs = fmt.Sprintf("%s%d", f.prefix, i%n), fmt.Sprintf("rev-%d", i/n), fmt.Sprintf("rs-%d", i/n)
		case j < e.cfg.LiveN:
			ns, rev = f.cluster(j), fmt.Sprintf("zlive-%d", j)
		default:
			j -= e.cfg.LiveN
			ns, rev = f.cluster(j), fmt.Sprintf("zsteady-%d", j)
		}
		if _, err := e.kc.CoreV1().ConfigMaps(ns).Create(ctx, revision(ns, rev, 0, nil), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("live: %w", err)
		}
		if rs == "" {
			return nil
		}
		_, err := e.kc.AppsV1().ReplicaSets(ns).Create(ctx, realisticReplicaSet(ns, rs), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("live: %w", err)
		}
		return nil
	})
}

// cluster is the name (and namespace) of the cluster live event j goes to.
func (f *clusterFleet) cluster(j int) string { return fmt.Sprintf("%s%d", f.prefix, j%len(f.proxies)) }

// sendLive creates LiveN ReplicaSets prefix-J (J's cluster by cluster(J), referencing
// revision prefix-J) liveSenders at once and POSTs each one's ADD right after its Create.
func (e *env) sendLive(ctx context.Context, f *clusterFleet, svc *service, prefix string) LiveRun {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: liveSenders}}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	synced := watchSynced(sctx, svc)
	var mu sync.Mutex
	var r LiveRun
	var all, in, starting []float64
	start := time.Now()
	_ = parallel(ctx, 0, e.cfg.LiveN, liveSenders, func(ctx context.Context, j int) error {
		ns, name := f.cluster(j), fmt.Sprintf("%s-%d", prefix, j)
		rs, err := e.kc.AppsV1().ReplicaSets(ns).Create(ctx, replicaSet(ns, name, name), metav1.CreateOptions{})
		if err != nil {
			mu.Lock()
			r.Failed++
			mu.Unlock()
			return nil
		}
		t0, wasSynced := time.Now(), synced(ns)
		a := postUntilAnswered(ctx, client, svc.httpAddr, ns, rs)
		mu.Lock()
		defer mu.Unlock()
		r.Busy, r.Unavailable = r.Busy+a.busy, r.Unavailable+a.unavailable
		switch {
		case a.status/100 != 2:
			r.Failed++
		case !bytes.Contains(a.body, []byte(`"outcome":"attached"`)) && !bytes.Contains(a.body, []byte(`"outcome":"already-attached"`)):
			r.NotAttached++
		case wasSynced:
			all, in = append(all, ms(time.Since(t0))), append(in, ms(time.Since(t0)))
		default:
			all, starting = append(all, ms(time.Since(t0))), append(starting, ms(time.Since(t0)))
		}
		return nil
	})
	r.Seconds, r.Latency, r.InSync, r.Starting = time.Since(start).Seconds(), percentiles(all), percentiles(in), percentiles(starting)
	return r
}

// watchSynced reads svc's configmap_attacher_cluster_synced every 200 ms until ctx ends;
// the function returned reports whether cluster was in sync at the last read.
func watchSynced(ctx context.Context, svc *service) func(cluster string) bool {
	var mu sync.Mutex
	in := map[string]bool{}
	read := func() {
		samples, err := svc.samples(ctx, "configmap_attacher_cluster_synced")
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for labels, v := range samples {
			in[labels] = v == 1
		}
	}
	read()
	go func() {
		for ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			read()
		}
	}()
	return func(cluster string) bool {
		mu.Lock()
		defer mu.Unlock()
		return in[`{cluster="`+cluster+`"}`]
	}
}

// liveAnswer is the last answer to one event and the 429 and 503 answers before it.
type liveAnswer struct {
	status, busy, unavailable int
	body                      []byte
}

// postUntilAnswered POSTs rs's ADD until an answer other than 429 or 503 (100 ms apart,
// for at most 30 s).
func postUntilAnswered(ctx context.Context, client *http.Client, addr, c string, rs *appsv1.ReplicaSet) liveAnswer {
	var a liveAnswer
	deadline := time.Now().Add(30 * time.Second)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		status, body, err := postAnswer(ctx, client, addr, c, rs)
		a.status, a.body = status, body
		switch {
		case err != nil:
		case status == http.StatusTooManyRequests:
			a.busy++
		case status == http.StatusServiceUnavailable:
			a.unavailable++
		default:
			return a
		}
		time.Sleep(100 * time.Millisecond)
	}
	return a
}

// liveRows are the rows of live events during the start-up replay.
func (r *Report) liveRows(add func(fig, meas, base, target, met string)) {
	l := r.Live
	if l == nil {
		return
	}
	run := func(x LiveRun) string {
		return fmt.Sprintf("%s (429: %d, 503: %d, failed %d, not attached %d; cluster in sync at send: %d, %s; still starting: %d, %s)",
			x.Latency, x.Busy, x.Unavailable, x.Failed, x.NotAttached, x.InSync.N, x.InSync, x.Starting.N, x.Starting)
	}
	d := l.DuringReplay
	add(fmt.Sprintf("live: %d fresh ADDs POSTed at /readyz, %d clusters x %d RS replaying: POST -> attached p50/p95/p99", d.Latency.N+d.Failed+d.NotAttached,
		l.Clusters, l.ReplicaSets),
		fmt.Sprintf("%s; ready %.1fs, replays done %.1fs, sent in %.1fs", run(d), l.ReadySeconds, l.DoneSeconds, d.Seconds),
		"after the replays: "+run(l.Steady), "p99 < 1 s", yesNo(d.Latency.N > 0 && d.Latency.P99 < 1000 && d.Failed == 0 && d.NotAttached == 0))
}
