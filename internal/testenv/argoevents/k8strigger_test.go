package argoevents

import "testing"

func TestK8sPatchSensor(t *testing.T) {
	for _, ps := range []string{PatchMerge, PatchStrategic} {
		s, err := K8sPatchSensor(ps)
		if err != nil {
			t.Fatalf("%s: %v", ps, err)
		}
		k := s.Spec.Triggers[0].Template.K8s
		if k == nil || string(k.Operation) != "patch" || string(k.PatchStrategy) != ps || k.Source == nil || k.Source.Resource == nil {
			t.Fatalf("%s: trigger %+v, want a k8s patch with strategy %s and an inline resource", ps, k, ps)
		}
		if len(k.Parameters) != 4 {
			t.Fatalf("%s: %d parameters, want 4", ps, len(k.Parameters))
		}
	}
	if _, err := K8sPatchSensor("application/json-patch+json"); err == nil {
		t.Fatal("a JSON patch strategy was accepted")
	}
}
