package deploytest

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// podSpec returns the rendered Deployment's pod spec.
func podSpec(t *testing.T, values string) map[string]any {
	t.Helper()
	d := renderedKind(t, values, "Deployment")
	spec, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
	return spec
}

// TestChartSpreadsReplicas: with more than one replica the pods are spread over nodes and
// zones (ScheduleAnyway: never blocks scheduling); one replica gets no constraint; an
// explicit list replaces the default and [] turns it off.
func TestChartSpreadsReplicas(t *testing.T) {
	selector := map[string]any{"matchLabels": map[string]any{
		"app.kubernetes.io/name": "configmap-attacher", "app.kubernetes.io/instance": releaseName}}
	spread := func(key string) map[string]any {
		return map[string]any{"maxSkew": int64(1), "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway",
			"labelSelector": selector, "matchLabelKeys": []any{"pod-template-hash"}}
	}
	custom := map[string]any{"maxSkew": int64(2), "topologyKey": "example.com/rack", "whenUnsatisfiable": "DoNotSchedule",
		"labelSelector": selector}
	for _, tc := range []struct {
		name, values string
		want         []any
	}{
		{"one replica", "", nil},
		{"three replicas", "replicaCount: 3\n", []any{spread("kubernetes.io/hostname"), spread("topology.kubernetes.io/zone")}},
		{"three replicas, none wanted", "replicaCount: 3\ntopologySpreadConstraints: []\n", nil},
		{"an explicit list", "replicaCount: 3\ntopologySpreadConstraints:\n  - maxSkew: 2\n    topologyKey: example.com/rack\n    whenUnsatisfiable: DoNotSchedule\n    labelSelector:\n      matchLabels: {app.kubernetes.io/name: configmap-attacher, app.kubernetes.io/instance: configmap-attacher}\n",
			[]any{custom}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := podSpec(t, requiredValues+tc.values)["topologySpreadConstraints"].([]any)
			if !reflect.DeepEqual(normalize(got), normalize(tc.want)) {
				t.Errorf("topologySpreadConstraints:\n%s\nwant:\n%s", toYAML(t, got), toYAML(t, tc.want))
			}
		})
	}
}

// normalize makes YAML-decoded numbers comparable (float64 or int64 alike).
func normalize(v any) any {
	switch x := v.(type) {
	case []any:
		if len(x) == 0 {
			return nil
		}
		out := make([]any, len(x))
		for i := range x {
			out[i] = normalize(x[i])
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = normalize(e)
		}
		return out
	case float64:
		return int64(x)
	}
	return v
}

// TestChartStartupProbeAndPriority: a startupProbe on /healthz holds the liveness probe off
// for up to 5 minutes (a large cluster's start-up lists), and priorityClassName is passed.
func TestChartStartupProbeAndPriority(t *testing.T) {
	spec := podSpec(t, requiredValues+"priorityClassName: platform-critical\n")
	if spec["priorityClassName"] != "platform-critical" {
		t.Errorf("priorityClassName %v", spec["priorityClassName"])
	}
	c := spec["containers"].([]any)[0].(map[string]any)
	p, _ := c["startupProbe"].(map[string]any)
	path, _, _ := unstructured.NestedString(p, "httpGet", "path")
	period, _, _ := unstructured.NestedFieldNoCopy(p, "periodSeconds")
	failures, _, _ := unstructured.NestedFieldNoCopy(p, "failureThreshold")
	if path != "/healthz" || normalize(period).(int64)*normalize(failures).(int64) < 300 {
		t.Errorf("startupProbe %v: want GET /healthz allowing at least 300 s", p)
	}
	if _, ok := podSpec(t, requiredValues)["priorityClassName"]; ok {
		t.Error("priorityClassName rendered without a value")
	}
}
