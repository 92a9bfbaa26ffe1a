package bench

import (
	"encoding/json"
	"testing"
)

func TestPercentiles(t *testing.T) {
	v := make([]float64, 0, 100)
	for i := 100; i >= 1; i-- {
		v = append(v, float64(i))
	}
	l := percentiles(v)
	if l.N != 100 || l.P50 != 50 || l.P95 != 95 || l.P99 != 99 || l.Max != 100 {
		t.Fatalf("percentiles = %+v", l)
	}
	if (percentiles(nil) != Latency{}) {
		t.Fatal("percentiles of nothing should be zero")
	}
}

func TestCostOf(t *testing.T) {
	d := requests{"PATCH configmaps": 10, "GET replicasets": 5, "POST events": 10, "LIST configmaps": 1, "PUT replicasets/status": 7}
	c := costOf(d, 10)
	if c.WritesPerEvent != 1 || c.GetsPerEvent != 0.5 || c.RecordsPerEvent != 1 || c.ListsPerEvent != 0.1 {
		t.Fatalf("costOf = %+v", c)
	}
}

func TestTriggeredConfigMapReadsTheFixturesEnvFromConfigMap(t *testing.T) {
	body, err := json.Marshal(replicaSet("ns", "rs-7", "cm-7"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, payload, want string
	}{
		{"the shipped Sensor's payload names the fixture's ConfigMap", `{"type":"ADD","body":` + string(body) + `,"metadata":{"cluster":"in-cluster"}}`, "cm-7"},
		{"a payload without a body is refused", `{"type":"ADD"}`, ""},
		{"a ReplicaSet without containers is refused", `{"body":{"metadata":{"name":"rs-1"}}}`, ""},
		{"a container without an envFrom ConfigMap is refused", `{"body":{"spec":{"template":{"spec":{"containers":[{"name":"app"}]}}}}}`, ""},
		{"a payload that is not JSON is refused", `not json`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := triggeredConfigMap([]byte(tc.payload))
			if tc.want == "" {
				if err == nil {
					t.Fatalf("triggeredConfigMap = %q, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("triggeredConfigMap = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
