package inspect

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// Health as `kubectl argo rollouts get rollout` shows it: a Rollout's status.phase
// (Healthy, Progressing, Paused, Degraded) and message; a Deployment's Available and
// Progressing conditions; a ReplicaSet Healthy, Progressing or ScaledDown, and for a
// Rollout its role (stable, canary).

// The healths of WorkloadStatus.Health and ReplicaSetStatus.Health.
const (
	HealthHealthy     = "Healthy"
	HealthProgressing = "Progressing"
	HealthDegraded    = "Degraded"
	HealthPaused      = "Paused"
	HealthScaledDown  = "ScaledDown"
)

// addHealth reads the namespace's Rollouts and Deployments and sets each group's and
// ReplicaSet's health. A kind that cannot be read (no Rollout CRD, no RBAC) is left out.
func addHealth(ctx context.Context, c *kube.Clients, ns string, rep *Report) {
	rollouts := map[string]*unstructured.Unstructured{}
	if list, err := c.Dynamic.Resource(core.RolloutGVR).Namespace(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range list.Items {
			rollouts[list.Items[i].GetName()] = &list.Items[i]
		}
	}
	deploys := map[string]*appsv1.Deployment{}
	if list, err := c.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for i := range list.Items {
			deploys[list.Items[i].Name] = &list.Items[i]
		}
	}
	for i := range rep.Workloads {
		g := &rep.Workloads[i]
		var stable, canary string
		switch g.Kind {
		case core.RolloutKind:
			if ro := rollouts[g.Name]; ro != nil {
				g.Health, _, _ = unstructured.NestedString(ro.Object, "status", "phase")
				g.Message, _, _ = unstructured.NestedString(ro.Object, "status", "message")
				stable, _, _ = unstructured.NestedString(ro.Object, "status", "stableRS")
				canary, _, _ = unstructured.NestedString(ro.Object, "status", "currentPodHash")
				if n := core.RollbackWindowNote(ro); n != "" {
					g.Warnings = append(g.Warnings, n)
				}
			}
		case "Deployment":
			if d := deploys[g.Name]; d != nil {
				g.Health, g.Message = deploymentHealth(d)
			}
		}
		for j := range g.ReplicaSets {
			rs := &g.ReplicaSets[j]
			rs.Health = replicaSetHealth(rs)
			switch {
			case rs.PodHash != "" && rs.PodHash == stable:
				rs.Role = "stable"
			case rs.PodHash != "" && rs.PodHash == canary && stable != "":
				rs.Role = "canary"
			}
		}
	}
}

func replicaSetHealth(rs *ReplicaSetStatus) string {
	switch {
	case rs.Replicas == 0:
		return HealthScaledDown
	case rs.ReadyReplicas >= rs.Replicas:
		return HealthHealthy
	}
	return HealthProgressing
}

func deploymentHealth(d *appsv1.Deployment) (string, string) {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return HealthDegraded, c.Message
		}
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas >= want && d.Status.AvailableReplicas >= want &&
		d.Status.Replicas == d.Status.UpdatedReplicas {
		return HealthHealthy, ""
	}
	return HealthProgressing, fmt.Sprintf("%d of %d updated replicas available", d.Status.AvailableReplicas, want)
}
