// Package demo is the scripted canary behind `make demo`: on a running cluster with the
// service attached to it, it plays a Rollout's canary from config revision 1 to
// revision 2 and prints a readable timeline of what the service and the garbage
// collector did. Every step checks what it claims; Run fails at the first that does not hold.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Options configure Run.
type Options struct {
	// Namespace the demo creates and plays in; default "demo".
	Namespace string
	// StepTimeout bounds the wait of each step; default 60 s.
	StepTimeout time.Duration
}

type player struct {
	kc      kubernetes.Interface
	dc      dynamic.Interface
	out     io.Writer
	ns      string
	start   time.Time
	timeout time.Duration
	steps   int
}

func (p *player) say(format string, args ...any) {
	fmt.Fprintf(p.out, "[%6.2fs] %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

func (p *player) ok(format string, args ...any) {
	p.steps++
	fmt.Fprintf(p.out, "[%6.2fs]   ✓ %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

// wait polls cond every 100 ms until it returns nil or the step timeout passes.
func (p *player) wait(ctx context.Context, what string, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var last error
	for {
		if last = cond(); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("step failed: %s: %w", what, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Run plays the canary in a new namespace of the cluster kc and dc reach, where the
// service (any ingress path) is attaching revisions and kube-controller-manager's
// garbage collector runs. It writes the timeline to out and returns nil only if every
// step held.
func Run(ctx context.Context, kc kubernetes.Interface, dc dynamic.Interface, out io.Writer, opts Options) error {
	if opts.Namespace == "" {
		opts.Namespace = "demo"
	}
	if opts.StepTimeout == 0 {
		opts.StepTimeout = 60 * time.Second
	}
	p := &player{kc: kc, dc: dc, out: out, ns: opts.Namespace, start: time.Now(), timeout: opts.StepTimeout}
	err := p.play(ctx)
	if err != nil {
		fmt.Fprintf(out, "\nDEMO FAILED after %d steps: %v\n", p.steps, err)
		return err
	}
	fmt.Fprintf(out, "\nDEMO PASSED: %d steps held in %.1fs\n", p.steps, time.Since(p.start).Seconds())
	return nil
}

func (p *player) play(ctx context.Context) error {
	ns := p.ns
	if _, err := p.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	p.say("namespace %s: a canary Rollout %q moves from config revision 1 to revision 2", ns, "web")

	// Revision 1.
	if err := p.revision(ctx, "web-config-1", "color: blue"); err != nil {
		return err
	}
	p.say("created ConfigMap web-config-1 (label %s=true)", core.LabelRevision)
	ro, err := p.dc.Resource(core.RolloutGVR).Namespace(ns).Create(ctx, rollout("web-config-1"), metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating Rollout: %w", err)
	}
	p.say("created Rollout web (canary) using web-config-1")
	rs1, err := p.replicaSet(ctx, ro, "6d5f8b7c9", "web-config-1", 2)
	if err != nil {
		return err
	}
	p.say("ReplicaSet %s (revision 1) appears (created by the demo: the embedded default runs no Rollouts controller)", rs1.Name)
	if err := p.wait(ctx, "web-config-1 owned by "+rs1.Name, func() error { return p.ownedBy("web-config-1", rs1.UID) }); err != nil {
		return err
	}
	p.ok("configmap-attacher made ReplicaSet %s an owner of web-config-1", rs1.Name)

	// Revision 2 arrives: a new ConfigMap name and a new ReplicaSet, side by side with the old.
	if err := p.revision(ctx, "web-config-2", "color: green"); err != nil {
		return err
	}
	p.say("config change: created ConfigMap web-config-2; the canary starts")
	rs2, err := p.replicaSet(ctx, ro, "58c7d9f4b", "web-config-2", 1)
	if err != nil {
		return err
	}
	p.say("the canary ReplicaSet %s (revision 2) appears next to %s", rs2.Name, rs1.Name)
	if err := p.wait(ctx, "web-config-2 owned by "+rs2.Name, func() error { return p.ownedBy("web-config-2", rs2.UID) }); err != nil {
		return err
	}
	p.ok("configmap-attacher made ReplicaSet %s an owner of web-config-2", rs2.Name)
	if err := p.ownedBy("web-config-1", rs1.UID); err != nil {
		return fmt.Errorf("step failed: revision 1 kept its owner: %w", err)
	}
	p.ok("web-config-1 still owned by %s: both revisions live side by side", rs1.Name)

	// A pod of the old ReplicaSet is replaced (spot reclaim, OOM, node drain).
	if err := p.wait(ctx, "the namespace's default ServiceAccount", func() error {
		_, err := p.kc.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	pod, err := p.kc.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: rs1.Name + "-", Labels: rs1.Spec.Template.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs1.Name, UID: rs1.UID, Controller: ptr(true)}}},
		Spec: rs1.Spec.Template.Spec,
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating replacement pod: %w", err)
	}
	p.say("a pod of the old ReplicaSet is replaced: %s", pod.Name)
	if _, err := p.kc.CoreV1().ConfigMaps(ns).Get(ctx, "web-config-1", metav1.GetOptions{}); err != nil {
		return fmt.Errorf("step failed: the replacement pod's ConfigMap web-config-1: %w", err)
	}
	p.ok("web-config-1 still exists for the replacement pod to mount (no CreateContainerConfigError)")

	// The canary is promoted; the old ReplicaSet is removed.
	if err := p.kc.AppsV1().ReplicaSets(ns).Delete(ctx, rs1.Name, metav1.DeleteOptions{PropagationPolicy: ptr(metav1.DeletePropagationBackground)}); err != nil {
		return fmt.Errorf("deleting %s: %w", rs1.Name, err)
	}
	p.say("promotion: the old ReplicaSet %s is removed", rs1.Name)
	if err := p.wait(ctx, "the garbage collector to delete web-config-1", func() error {
		_, err := p.kc.CoreV1().ConfigMaps(ns).Get(ctx, "web-config-1", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errors.New("web-config-1 still exists")
	}); err != nil {
		return err
	}
	p.ok("Kubernetes' garbage collector deleted web-config-1: nothing uses it any more")
	if err := p.ownedBy("web-config-2", rs2.UID); err != nil {
		return fmt.Errorf("step failed: revision 2 survives: %w", err)
	}
	p.ok("web-config-2 is alive and owned by %s", rs2.Name)
	return nil
}

func (p *player) revision(ctx context.Context, name, data string) error {
	_, err := p.kc.CoreV1().ConfigMaps(p.ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{core.LabelRevision: "true", core.LabelFamily: "web-config"}},
		Data:       map[string]string{"config.yaml": data},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating ConfigMap %s: %w", name, err)
	}
	return nil
}

func (p *player) replicaSet(ctx context.Context, ro *unstructured.Unstructured, hash, configMap string, replicas int32) (*appsv1.ReplicaSet, error) {
	labels := map[string]string{"app": "web", core.RolloutHashLabel: hash}
	// Zero replicas in the API: the demo cluster has no nodes; the replica count is narrated.
	rs, err := p.kc.AppsV1().ReplicaSets(p.ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web-" + hash, Labels: labels,
			Annotations: map[string]string{"rollout.argoproj.io/desired-replicas": fmt.Sprint(replicas)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: ro.GetName(),
				UID: ro.GetUID(), Controller: ptr(true), BlockOwnerDeletion: ptr(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: podTemplate(labels, configMap)},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating ReplicaSet: %w", err)
	}
	return rs, nil
}

func (p *player) ownedBy(name string, uid types.UID) error {
	cm, err := p.kc.CoreV1().ConfigMaps(p.ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, o := range cm.OwnerReferences {
		if o.UID == uid {
			return nil
		}
	}
	return fmt.Errorf("%s has owners %v", name, cm.OwnerReferences)
}

func podTemplate(labels map[string]string, configMap string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27",
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/web"}}}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}}},
		},
	}
}

func rollout(configMap string) *unstructured.Unstructured {
	tmpl := podTemplate(map[string]string{"app": "web"}, configMap)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
		"metadata": map[string]any{"name": "web"},
		"spec": map[string]any{
			"replicas": int64(2),
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{
					"containers": []any{map[string]any{"name": "web", "image": tmpl.Spec.Containers[0].Image,
						"volumeMounts": []any{map[string]any{"name": "config", "mountPath": "/etc/web"}}}},
					"volumes": []any{map[string]any{"name": "config", "configMap": map[string]any{"name": configMap}}},
				},
			},
			"strategy": map[string]any{"canary": map[string]any{"steps": []any{
				map[string]any{"setWeight": int64(50)}, map[string]any{"pause": map[string]any{}}}}},
		},
	}}
}

func ptr[T any](v T) *T { return &v }
