package bench

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// ClusterPoint is one replica serving Clusters idle Argo CD clusters (each an empty
// namespace of the control plane) besides its home cluster: its RSS and goroutines once
// start-up is done, how long until every cluster's caches were in sync, and the cost per
// cluster against the first level.
type ClusterPoint struct {
	Clusters     int     `json:"clusters"`
	RSS          int64   `json:"rssBytes"`
	HWM          int64   `json:"peakBytes"`
	Goroutines   int     `json:"goroutines"`
	ReadySeconds float64 `json:"readySeconds"`
	// Per cluster, against the first level: (figure - first's) / (clusters - first's).
	BytesPerCluster      float64 `json:"bytesPerCluster,omitempty"`
	GoroutinesPerCluster float64 `json:"goroutinesPerCluster,omitempty"`
}

// ForwardResult is the fleet's forwarding: the same HTTP event POSTed to the replica owning
// its cluster (local) and to one that forwards it to the owner, clock POST -> answer.
type ForwardResult struct {
	Clusters  int     `json:"clusters"`
	Local     Latency `json:"local"`
	Forwarded Latency `json:"forwarded"`
	Failed    int     `json:"failed"`
}

// clusterSecrets is the Argo CD cluster Secrets' namespace of the clusters scenario.
const clusterSecrets = "bench-argocd"

// clusterFleet holds the logical clusters: namespace bench-cl-I and an Argo CD Secret
// naming the control plane through a loopback proxy of its own (one server URL under two
// names is refused: docs/safety.md).
type clusterFleet struct {
	e *env
	// secrets is the Argo CD Secrets' namespace, prefix the clusters' (and their
	// namespaces') name before the index: each scenario has its own, as its proxies
	// close with it.
	secrets, prefix string
	proxies         []net.Listener
}

func (f *clusterFleet) close() {
	for _, l := range f.proxies {
		_ = l.Close()
	}
}

// grow creates clusters up to n (16 at once: the fleet scenario makes 1,000).
func (f *clusterFleet) grow(ctx context.Context, n int) error {
	u, err := url.Parse(f.e.cp.ServerURL())
	if err != nil {
		return err
	}
	if err := f.e.ensureNamespace(ctx, f.secrets); err != nil {
		return err
	}
	cfg, _ := json.Marshal(map[string]any{"bearerToken": f.e.cp.AdminToken(),
		"tlsClientConfig": map[string]any{"caData": base64.StdEncoding.EncodeToString(f.e.cp.CAData())}})
	from := len(f.proxies)
	for i := from; i < n; i++ {
		l, err := loopbackProxy(u.Host)
		if err != nil {
			return err
		}
		f.proxies = append(f.proxies, l)
	}
	return parallel(ctx, from, n, 16, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("%s%d", f.prefix, i)
		if err := f.e.ensureNamespace(ctx, name); err != nil {
			return err
		}
		_, err := f.e.kc.CoreV1().Secrets(f.secrets).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{cluster.ArgoCDSecretTypeLabel: cluster.ArgoCDSecretTypeCluster}},
			StringData: map[string]string{"name": name, "server": "https://" + f.proxies[i].Addr().String(), "config": string(cfg), "namespaces": name}},
			metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("cluster Secret %s: %w", name, err)
		}
		return nil
	})
}

// loopbackProxy forwards every connection to target (TLS passes through: the apiserver's
// certificate names 127.0.0.1, whatever the port).
func loopbackProxy(target string) (net.Listener, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("loopback proxy: %w", err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c) }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	return l, nil
}

// clusters measures one replica at each of ClusterLevels idle clusters, and the fleet's
// forwarding at the first level above one.
func (e *env) clusters(ctx context.Context, rep *Report) error {
	f := &clusterFleet{e: e, secrets: clusterSecrets, prefix: "bench-cl-"}
	defer f.close()
	for _, ns := range []string{clusterSecrets, "bench-cl-home"} {
		if err := e.ensureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	for _, n := range e.cfg.ClusterLevels {
		if err := f.grow(ctx, n); err != nil {
			return err
		}
		p, err := e.measureClusters(ctx, n)
		if err != nil {
			return err
		}
		if len(rep.Clusters) > 0 {
			first := rep.Clusters[0]
			d := float64(p.Clusters - first.Clusters)
			p.BytesPerCluster, p.GoroutinesPerCluster = float64(p.RSS-first.RSS)/d, float64(p.Goroutines-first.Goroutines)/d
		}
		rep.Clusters = append(rep.Clusters, p)
		e.cfg.Logf("   clusters: %d idle: RSS %.1f MiB, %d goroutines, all in sync after %.1fs", n, float64(p.RSS)/(1<<20), p.Goroutines, p.ReadySeconds)
		// The forwarding over the first level of several clusters.
		if n > 1 && rep.Forward == nil && e.cfg.ForwardN > 0 {
			if rep.Forward, err = e.forwarding(ctx, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// clusterFlags are serve's flags for the clusters scenario: Argo CD clusters, the watcher
// and the periodic sweep (the chart's 10m) in each.
func clusterFlags() []string {
	return []string{"--argocd-clusters", clusterSecrets, "--watch", "--watch-namespace", "bench-cl-home", "--gc-interval", "10m",
		"--max-clusters", "10000", "--log-level", "info"}
}

// measureClusters starts serve with the first n cluster Secrets and reads it once every
// cluster is in sync and start-up is done.
func (e *env) measureClusters(ctx context.Context, n int) (*ClusterPoint, error) {
	pp, err := controlplane.FreePort()
	if err != nil {
		return nil, err
	}
	prof := fmt.Sprintf("127.0.0.1:%d", pp)
	svc, err := e.startService(ctx, fmt.Sprintf("clusters-%d", n), append(clusterFlags(), "--profiling-addr", prof)...)
	if err != nil {
		return nil, err
	}
	defer svc.stop()
	// Secrets beyond n (a previous level's run left none: levels only grow).
	if err := svc.waitMetric(ctx, "configmap_attacher_cluster_synced", n+1, 3*time.Minute); err != nil {
		return nil, err
	}
	p := &ClusterPoint{Clusters: n, ReadySeconds: time.Since(svc.startedAt).Seconds()}
	svc.waitLog(ctx, startupDone, time.Minute)
	time.Sleep(3 * time.Second) // let the start-up's garbage go
	if p.RSS, p.HWM, err = svc.rss(); err != nil {
		return nil, err
	}
	g, err := svc.scrape(ctx, "go_goroutines")
	if err != nil {
		return nil, err
	}
	p.Goroutines = int(g)
	// The goroutines by creator, beside the logs (bench/README.md, "per-cluster cost").
	if err := saveProfile(ctx, prof, "goroutine?debug=1", filepath.Join(e.logDir, fmt.Sprintf("goroutines-clusters-%d.txt", n))); err != nil {
		e.cfg.Logf("   clusters: goroutine profile: %v", err)
	}
	return p, nil
}

// saveProfile writes serve's /debug/pprof/<profile> to path.
func saveProfile(ctx context.Context, addr, profile, path string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/debug/pprof/"+profile, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile %s: %w", profile, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("profile %s: %w", profile, err)
	}
	return os.WriteFile(path, b, 0o644)
}

// scrape returns the sum of the samples of name on serve's /metrics.
func (s *service) scrape(ctx context.Context, name string) (float64, error) {
	samples, err := s.samples(ctx, name)
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for _, v := range samples {
		sum += v
	}
	return sum, nil
}

// samples returns the samples of name on serve's /metrics, by their label text.
func (s *service) samples(ctx context.Context, name string) (map[string]float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.httpAddr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping serve: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scraping serve: %w", err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		i := strings.LastIndexByte(rest, ' ')
		var v float64
		if _, err := fmt.Sscan(rest[i+1:], &v); err == nil {
			out[strings.TrimSpace(rest[:i])] = v
		}
	}
	return out, nil
}

// waitMetric waits until want samples of the gauge name read 1.
func (s *service) waitMetric(ctx context.Context, name string, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	got := 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		samples, err := s.samples(ctx, name)
		got = 0
		for _, v := range samples {
			if v == 1 {
				got++
			}
		}
		if err == nil && got >= want {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s: %d of %d at 1 after %s\n%s", name, got, want, timeout, tail(s.logFile, 10))
}

// forwarding runs two replicas sharing n clusters (serve --fleet) without watchers, and
// POSTs the ADD of fresh ReplicaSets of one cluster, one at a time and alternately, to
// the replica owning it and to the other: the forwarded answers' latency beside the local.
func (e *env) forwarding(ctx context.Context, n int) (*ForwardResult, error) {
	if err := e.ensureNamespace(ctx, "bench-fleet"); err != nil {
		return nil, err
	}
	var reps []*service
	defer func() {
		for _, s := range reps {
			s.stop()
		}
	}()
	for _, id := range []string{"a", "b"} {
		port, err := controlplane.FreePort()
		if err != nil {
			return nil, err
		}
		s, err := e.startService(ctx, "fleet-"+id, "--argocd-clusters", clusterSecrets, "--watch-namespace", "bench-cl-home",
			"--max-clusters", "10000", "--fleet", "--fleet-namespace", "bench-fleet", "--fleet-identity", id, "--fleet-shards", "16",
			"--fleet-addr", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return nil, err
		}
		reps = append(reps, s)
	}
	owner, other, c, err := ownedCluster(ctx, reps, n)
	if err != nil {
		return nil, err
	}
	r := &ForwardResult{Clusters: n}
	client := &http.Client{Timeout: 30 * time.Second}
	var local, forwarded []float64
	for i := 0; i < 2*e.cfg.ForwardN && ctx.Err() == nil; i++ {
		name := fmt.Sprintf("fwd-%d", i)
		if err := e.kc.CoreV1().ConfigMaps(c).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if _, err := e.kc.CoreV1().ConfigMaps(c).Create(ctx, revision(c, name, 0, nil), metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("forwarding: %w", err)
		}
		_ = e.kc.AppsV1().ReplicaSets(c).Delete(ctx, name, metav1.DeleteOptions{})
		rs, err := e.kc.AppsV1().ReplicaSets(c).Create(ctx, replicaSet(c, name, name), metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("forwarding: %w", err)
		}
		to, into := owner, &local
		if i%2 == 1 {
			to, into = other, &forwarded
		}
		start := time.Now()
		if err := postEvent(ctx, client, to.httpAddr, c, rs); err != nil {
			r.Failed++
			continue
		}
		*into = append(*into, ms(time.Since(start)))
	}
	r.Local, r.Forwarded = percentiles(local), percentiles(forwarded)
	e.cfg.Logf("   forwarding over %d clusters: local %s, forwarded %s, %d failed", n, r.Local, r.Forwarded, r.Failed)
	return r, nil
}

// ownedCluster waits until the replicas share the n clusters, one owner each, each
// replica sees the other, and the owner of the first Argo CD cluster has not changed for
// five checks a second apart (the start-up hand-over of shards to their preferred replicas
// is over); it returns that owner, the other replica, and the cluster.
func ownedCluster(ctx context.Context, reps []*service, n int) (owner, other *service, c string, err error) {
	c = "bench-cl-0"
	deadline := time.Now().Add(2 * time.Minute)
	last, stable := -1, 0
	for time.Now().Before(deadline) && ctx.Err() == nil {
		owned, total, members := -1, 0, 0
		for i, s := range reps {
			samples, serr := s.samples(ctx, "configmap_attacher_cluster_owned")
			if serr != nil {
				return nil, nil, "", serr
			}
			for labels, v := range samples {
				total += int(v)
				if v == 1 && strings.Contains(labels, `cluster="`+c+`"`) {
					owned = i
				}
			}
			if m, _ := s.scrape(ctx, "configmap_attacher_fleet_members"); int(m) == len(reps) {
				members++
			}
		}
		if owned >= 0 && owned == last && total == n+1 && members == len(reps) {
			if stable++; stable >= 5 {
				return reps[owned], reps[1-owned], c, nil
			}
		} else {
			stable = 0
		}
		last = owned
		time.Sleep(time.Second)
	}
	return nil, nil, "", errors.New("forwarding: the two replicas did not settle on the clusters within 2m")
}
