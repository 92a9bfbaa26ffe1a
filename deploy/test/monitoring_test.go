package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// monitoringValues: three replicas, so a fleet (the ownership alerts are rendered with one).
const monitoringValues = requiredValues + `
replicaCount: 3
prometheusRule:
  enabled: true
grafanaDashboard:
  enabled: true
`

// processMetrics are the Go and process collectors' metrics /metrics serves.
var processMetrics = []string{"process_resident_memory_bytes", "process_cpu_seconds_total", "go_memstats_heap_inuse_bytes", "go_goroutines"}

// renderedKind returns the one rendered object of kind.
func renderedKind(t *testing.T, values, kind string) *unstructured.Unstructured {
	t.Helper()
	objs, err := decodeObjects(joinManifests(renderChart(t, templateMode, values)))
	if err != nil {
		t.Fatal(err)
	}
	var found *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			if found != nil {
				t.Fatalf("two %s objects rendered", kind)
			}
			found = o
		}
	}
	if found == nil {
		t.Fatalf("no %s rendered", kind)
	}
	return found
}

// codeMetrics are the configmap_attacher_ metric names defined in the main module's code.
func codeMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	re := regexp.MustCompile(`"(configmap_attacher_[a-z_]+)"`)
	err := filepath.WalkDir(filepath.Join(repoRoot(t), "internal"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := os.ReadFile(p)
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			names[m[1]] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// knownMetrics: what a query may name, with histograms' _bucket, _count and _sum series.
func knownMetrics(t *testing.T) []string {
	var out []string
	for n := range codeMetrics(t) {
		out = append(out, n, n+"_bucket", n+"_count", n+"_sum")
	}
	out = append(out, processMetrics...)
	sort.Strings(out)
	return out
}

var metricRef = regexp.MustCompile(`\b((?:configmap_attacher|process|go)_[a-z_]+)\b`)

// TestPrometheusRuleAlerts: the rendered PrometheusRule's groups pass the pinned
// `promtool check rules` and the unit tests of testdata/alerts.test.yaml under
// `promtool test rules`; every alert has a test, a runbook section its runbook_url links,
// and reads only metrics the service exports.
func TestPrometheusRuleAlerts(t *testing.T) {
	rule := renderedKind(t, monitoringValues, "PrometheusRule")
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	dir := t.TempDir()
	rules := toYAML(t, map[string]any{"groups": groups})
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts.test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runTool(t, "promtool", "check", "rules", filepath.Join(dir, "rules.yaml")); err != nil {
		t.Fatalf("promtool check rules: %v\n%s\n%s", err, out, rules)
	}
	if out, err := runTool(t, "promtool", "test", "rules", filepath.Join(dir, "alerts.test.yaml")); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	} else {
		t.Log(out)
	}
	runbook, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, n := range knownMetrics(t) {
		known[n] = true
	}
	for _, g := range groups {
		rs, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
		for _, r := range rs {
			r := r.(map[string]any)
			name, _ := r["alert"].(string)
			if !strings.Contains(string(tests), "alertname: "+name+"\n") {
				t.Errorf("alert %s has no case in testdata/alerts.test.yaml", name)
			}
			if !strings.Contains(string(runbook), "\n## "+name+"\n") {
				t.Errorf("docs/runbook.md has no section ## %s", name)
			}
			url, _, _ := unstructured.NestedString(r, "annotations", "runbook_url")
			if want := "docs/runbook.md#" + strings.ToLower(name); !strings.HasSuffix(url, want) {
				t.Errorf("alert %s: runbook_url %q, want it to end in %s", name, url, want)
			}
			expr, _ := r["expr"].(string)
			for _, m := range metricRef.FindAllString(expr, -1) {
				if !known[m] {
					t.Errorf("alert %s reads %s, which the service does not export", name, m)
				}
			}
		}
	}
}

// TestGrafanaDashboard: the rendered ConfigMap carries the Grafana sidecar's label and the
// dashboard, which passes the pinned dashboard-lint (Grafana's schema, PromQL parsing,
// dashboard-linter's rules, only metrics the service exports); and the linter refuses
// dashboards that break its rules, so a passing run means something.
func TestGrafanaDashboard(t *testing.T) {
	cm := renderedKind(t, monitoringValues, "ConfigMap")
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v: the Grafana sidecar looks for grafana_dashboard: \"1\"", cm.GetLabels())
	}
	dash, _, _ := unstructured.NestedString(cm.Object, "data", "configmap-attacher.json")
	metrics := tempFile(t, "metrics.txt", strings.Join(knownMetrics(t), "\n"))
	f := tempFile(t, "configmap-attacher.json", dash)
	if out, err := runTool(t, "dashboard-lint", "-metrics", metrics, f); err != nil {
		t.Fatalf("dashboard-lint: %v\n%s", err, out)
	}
	for _, bad := range []struct{ name, from, to, rule string }{
		{"a fixed rate range", "[$__rate_interval]", "[5m]", "target-rate-interval-rule"},
		{"a query that does not parse", "sum by (path, result) (rate(", "sum by (path, result) (rate((", "target-promql-rule"},
		{"no job matcher", `job=~\"$job\", instance=~\"$instance\"`, `instance=~\"$instance\"`, "target-job-rule"},
		{"a metric the service does not export", "by (instance) (configmap_attacher_events_in_flight{", "by (instance) (configmap_attacher_events_inflight{", "target-metric-rule"},
		{"a field Grafana's schema does not have", `"graphTooltip"`, `"graphToolTip"`, "schema"},
		{"a panel without a unit", `"unit": "s"`, `"unit": ""`, "panel-units-rule"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			if !strings.Contains(dash, bad.from) {
				t.Fatalf("the dashboard has no %q to break", bad.from)
			}
			f := tempFile(t, "bad.json", strings.Replace(dash, bad.from, bad.to, 1))
			out, err := runTool(t, "dashboard-lint", "-metrics", metrics, f)
			if err == nil || !strings.Contains(out, bad.rule) {
				t.Errorf("dashboard-lint did not report %s (%v):\n%s", bad.rule, err, out)
			}
		})
	}
}

// TestMonitoringOffByDefault: like the ServiceMonitor, the PrometheusRule and the dashboard
// need a value (their CRD or sidecar may not be there).
func TestMonitoringOffByDefault(t *testing.T) {
	objs, err := decodeObjects(joinManifests(renderChart(t, templateMode, requiredValues)))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "PrometheusRule" || o.GetKind() == "ServiceMonitor" || o.GetKind() == "ConfigMap" {
			t.Errorf("rendered by default: %s %s", o.GetKind(), o.GetName())
		}
	}
}

// TestOwnershipAlertsOnlyWithAFleet: without a fleet every replica runs every cluster, so
// the alerts on how many replicas run a cluster, and on a replica holding no shard, are
// rendered only with one.
func TestOwnershipAlertsOnlyWithAFleet(t *testing.T) {
	for _, tc := range []struct {
		name, values string
		want         bool
	}{
		{"three replicas, fleet auto", "replicaCount: 3\n", true},
		{"three replicas, fleet off", "replicaCount: 3\nfleet:\n  enabled: false\n", false},
		{"one replica, fleet auto", "", false},
		{"one replica, fleet on", "fleet:\n  enabled: true\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := renderedKind(t, requiredValues+"prometheusRule:\n  enabled: true\n"+tc.values, "PrometheusRule")
			groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
			got := map[string]bool{}
			for _, g := range groups {
				rs, _, _ := unstructured.NestedSlice(g.(map[string]any), "rules")
				for _, r := range rs {
					name, _ := r.(map[string]any)["alert"].(string)
					got[name] = true
				}
			}
			for _, a := range []string{"ConfigmapAttacherClusterUnowned", "ConfigmapAttacherClusterMultiplyOwned",
				"ConfigmapAttacherFleetIdentityWaiting", "ConfigmapAttacherFleetShardCountMismatch"} {
				if got[a] != tc.want {
					t.Errorf("alert %s rendered: %v, want %v", a, got[a], tc.want)
				}
			}
			if !got["ConfigmapAttacherClusterDown"] {
				t.Error("the other alerts are rendered either way")
			}
		})
	}
}
