package acceptance_test

import (
	"fmt"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Scenario 14. A canary with traffic routing (NGINX Ingress: the controller only edits
// Ingress objects, no ingress controller is needed) and dynamicStableScale: at 50% the
// controller scales the stable ReplicaSet down to half, a stable Pod is replaced
// meanwhile, and the abort scales the stable back up. The stable revision survives all
// of it (owned throughout, every new stable Pod finds it), the canary's lives as long as
// the canary ReplicaSet, and no revision in use is ever missing.
func TestDynamicStableScaleAbortKeepsTheStableRevision(t *testing.T) {
	w := newWorld(t)
	w.ServeWatcher()
	w.guardUsedRevisions()
	v1 := app{name: "web", replicas: 4, configMap: "web-config-1", version: "1", history: ptr(int32(0)), pause: true}
	v2 := v1.with("web-config-2", "2")
	w.service("web-stable", v1.name)
	w.service("web-canary", v1.name)
	w.ingress("web", "web-stable")
	w.revision(v1.configMap)
	w.createRollout(v1, map[string]any{"canary": map[string]any{
		"stableService": "web-stable", "canaryService": "web-canary", "dynamicStableScale": true,
		"trafficRouting": map[string]any{"nginx": map[string]any{"stableIngress": "web"}},
		"steps":          v1.steps(),
	}}, nil)
	rs1 := w.waitHealthy(v1)
	w.waitOwned("ConfigMap", v1.configMap, rs1)

	w.revision(v2.configMap)
	w.deploy(v2)
	rs2 := w.waitPaused(v2)
	w.waitOwned("ConfigMap", v2.configMap, rs2)
	w.Eventually("the stable scaled down to half mid-canary", func() error {
		if got := w.get(rs1); *got.Spec.Replicas != 2 || got.Status.ReadyReplicas != 2 {
			return fmt.Errorf("stable %s: %d desired, %d Ready", rs1.Name, *got.Spec.Replicas, got.Status.ReadyReplicas)
		}
		return nil
	})
	w.replacePod(rs1)
	w.mustExist(v1.configMap)

	w.abort(v1.name)
	w.Eventually("the abort: stable back to 4, canary at 0", func() error {
		st, err := w.status(v1.name)
		if err != nil || !st.Aborted {
			return fmt.Errorf("rollout %s (err %v)", st, err)
		}
		if s := w.get(rs1); *s.Spec.Replicas != 4 || s.Status.ReadyReplicas != 4 {
			return fmt.Errorf("stable %s: %d desired, %d Ready", rs1.Name, *s.Spec.Replicas, s.Status.ReadyReplicas)
		}
		if c := w.get(rs2); c.Status.Replicas != 0 {
			return fmt.Errorf("canary %s has %d Pods", rs2.Name, c.Status.Replicas)
		}
		return nil
	})
	w.podsReady(rs1, v1, 4)
	w.waitOwned("ConfigMap", v1.configMap, rs1)
	w.waitOwned("ConfigMap", v2.configMap, rs2)

	// A GitOps revert ends the aborted canary ReplicaSet's life, and its revision's.
	w.deploy(v1)
	w.waitHealthy(v1)
	w.WaitGone("ReplicaSet "+rs2.Name, func() error { _, err := w.getErr(rs2); return err })
	w.waitConfigMapGone(v2.configMap)
	w.Eventually("the revisions are exactly those the ReplicaSets left use", w.revisionsMatchAllReplicaSets)
	t.Logf("guard checked %d Pods", w.events.podsChecked())
}

// ingress creates the NGINX Ingress a canary's trafficRouting names, routing to service.
func (w *world) ingress(name, service string) {
	w.T.Helper()
	prefix := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kubernetes.io/ingress.class": "nginx"}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: name + ".example",
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: service, Port: networkingv1.ServiceBackendPort{Name: "http"}}},
			}}}}}}},
	}
	if _, err := w.Kube.NetworkingV1().Ingresses(w.NS).Create(w.Ctx, ing, metav1.CreateOptions{}); err != nil {
		w.T.Fatalf("create Ingress %s: %v", name, err)
	}
}
