package bench

import "testing"

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
