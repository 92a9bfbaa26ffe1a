package bench

import (
	"fmt"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argoevents"
)

// uidHexDigits are the characters a Kubernetes UID ends with.
const uidHexDigits = "0123456789abcdef"

// laneSensor returns a copy of s whose every trigger is split into k lanes (k divides
// 16; 1 returns s unchanged). sensor-service runs the triggers of a Sensor side by
// side but handles one event at a time within a trigger (an atLeastOnce trigger is
// called in the trigger's one message loop), so k lanes are k events in flight. Lane i
// of trigger T fires on its own copy of T's dependency that passes only ReplicaSets
// whose UID ends in lane i's share of the hex digits (laneFilter): every UID passes
// exactly one lane, so an event is delivered once, with T's retries.
func laneSensor(s *v1alpha1.Sensor, k int) (*v1alpha1.Sensor, error) {
	if k <= 1 {
		return s, nil
	}
	if len(uidHexDigits)%k != 0 {
		return nil, fmt.Errorf("lanes: %d does not divide %d", k, len(uidHexDigits))
	}
	out := s.DeepCopy()
	out.Spec.Dependencies, out.Spec.Triggers = nil, nil
	deps := map[string]v1alpha1.EventDependency{}
	for _, d := range s.Spec.Dependencies {
		deps[d.Name] = d
	}
	for _, t := range s.Spec.Triggers {
		dep, ok := deps[t.Template.Conditions]
		if !ok {
			return nil, fmt.Errorf("lanes: trigger %s: conditions %q is not one dependency", t.Template.Name, t.Template.Conditions)
		}
		for i := 0; i < k; i++ {
			d := *dep.DeepCopy()
			d.Name = fmt.Sprintf("%s-lane%d", dep.Name, i)
			if d.Filters == nil {
				d.Filters = &v1alpha1.EventDependencyFilter{}
			}
			d.Filters.Data = append(d.Filters.Data, laneFilter(i, k))
			lt := *t.DeepCopy()
			lt.Template.Name = fmt.Sprintf("%s-lane%d", t.Template.Name, i)
			lt.Template.Conditions = d.Name
			if ct := lt.Template.CustomTrigger; ct != nil {
				for j := range ct.Payload {
					if ct.Payload[j].Src != nil && ct.Payload[j].Src.DependencyName == dep.Name {
						ct.Payload[j].Src.DependencyName = d.Name
					}
				}
			}
			out.Spec.Dependencies = append(out.Spec.Dependencies, d)
			out.Spec.Triggers = append(out.Spec.Triggers, lt)
		}
	}
	return out, nil
}

// laneFilter passes the events whose body.metadata.uid ends in lane i's share of the
// hex digits; the last lane takes every other ending too, so no event falls through.
func laneFilter(i, k int) v1alpha1.DataFilter {
	n := len(uidHexDigits) / k
	var re string
	if i == k-1 {
		re = "[^" + uidHexDigits[:i*n] + "]$"
	} else {
		re = "[" + uidHexDigits[i*n:(i+1)*n] + "]$"
	}
	return v1alpha1.DataFilter{Path: "body.metadata.uid", Type: v1alpha1.JSONTypeString, Value: []string{re}}
}

// gRPCSensor is the shipped gRPC Sensor in Config.ArgoLanes lanes, aimed at target.
func (e *env) gRPCSensor(target string) (*v1alpha1.Sensor, error) {
	root, err := argoevents.RepoRoot()
	if err != nil {
		return nil, err
	}
	objs, err := argoevents.LoadShipped(root)
	if err != nil {
		return nil, err
	}
	s, err := laneSensor(objs.GRPCSensor, e.cfg.ArgoLanes)
	if err != nil {
		return nil, err
	}
	argoevents.SetCustomTriggerServer(s, target)
	return s, nil
}
