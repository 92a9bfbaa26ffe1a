package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// apiMetrics reads apiserver_request_total from the apiserver's /metrics (admin token).
type apiMetrics struct {
	url, token string
	client     *http.Client
}

func newAPIMetrics(cp *controlplane.ControlPlane) (*apiMetrics, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cp.CAData()) {
		return nil, fmt.Errorf("bench: control plane CA is not PEM")
	}
	return &apiMetrics{url: cp.ServerURL() + "/metrics", token: cp.AdminToken(), client: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}}, nil
}

// requests counts apiserver_request_total by "VERB resource[/subresource]".
type requests map[string]float64

var labelRE = regexp.MustCompile(`(\w+)="([^"]*)"`)

func (m *apiMetrics) snapshot(ctx context.Context) (requests, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+m.token)
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading apiserver metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading apiserver metrics: %s", resp.Status)
	}
	out := requests{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	const prefix = "apiserver_request_total{"
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		end := strings.LastIndexByte(line, '}')
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(line[end+1:]), 64)
		if err != nil {
			continue
		}
		l := map[string]string{}
		for _, m := range labelRE.FindAllStringSubmatch(line[len(prefix):end], -1) {
			l[m[1]] = m[2]
		}
		key := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			key += "/" + l["subresource"]
		}
		out[key] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading apiserver metrics: %w", err)
	}
	return out, nil
}

// since returns r - before.
func (r requests) since(before requests) requests {
	d := requests{}
	for k, v := range r {
		if x := v - before[k]; x != 0 {
			d[k] = x
		}
	}
	return d
}

// sum adds the counts of the given verbs on the given resources.
func (r requests) sum(verbs []string, resources []string) float64 {
	var n float64
	for _, v := range verbs {
		for _, res := range resources {
			n += r[v+" "+res]
		}
	}
	return n
}

// The resources the service reads and writes (kube-controller-manager's own traffic,
// leases and status updates, is left out).
var (
	serviceReads  = []string{"replicasets", "configmaps", "secrets", "rollouts", "deployments"}
	configObjects = []string{"configmaps", "secrets"}
	writeVerbs    = []string{"PATCH", "PUT", "APPLY"}
)

// cost is the request cost of a run per event.
type cost struct {
	Events float64 `json:"events"`
	// Writes: PATCH/PUT/APPLY on ConfigMaps and Secrets; Records: Kubernetes Events
	// created (one "Attached" per changed object); Gets: GETs of the objects the service
	// reads; Lists: LISTs of them (cache relists).
	WritesPerEvent  float64  `json:"writesPerEvent"`
	RecordsPerEvent float64  `json:"eventRecordsPerEvent"`
	GetsPerEvent    float64  `json:"getsPerEvent"`
	ListsPerEvent   float64  `json:"listsPerEvent"`
	Raw             requests `json:"raw"`
}

func costOf(d requests, events int) cost {
	c := cost{Events: float64(events), Raw: d}
	if events == 0 {
		return c
	}
	n := float64(events)
	c.WritesPerEvent = d.sum(writeVerbs, configObjects) / n
	c.RecordsPerEvent = (d["POST events"] + d["PATCH events"]) / n
	c.GetsPerEvent = d.sum([]string{"GET"}, serviceReads) / n
	c.ListsPerEvent = d.sum([]string{"LIST"}, serviceReads) / n
	return c
}
