// Package demo is the scripted canary behind `make demo`: on a cluster where the real
// Argo Rollouts controller, a scheduler and a node agent run (the embedded default does)
// and the service is attaching revisions, it plays a Rollout's life from config
// revision 1 to an aborted canary and prints a readable timeline of what the Rollouts
// controller, the service and Kubernetes' garbage collector did. The demo only does
// what a user does (create ConfigMaps, edit the Rollout, promote, abort, undo, delete a
// Pod); every step checks what it claims, and Run fails at the first that does not hold.
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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argorollouts"
)

// Options configure Run.
type Options struct {
	// Namespace the demo creates and plays in; default "demo". A namespace left by an
	// earlier run (it carries the label demo.configmap-attacher.io/owner) is deleted and
	// created again; any other existing namespace is refused.
	Namespace string
	// StepTimeout bounds the wait of each step; default 90 s.
	StepTimeout time.Duration
}

// The Rollout the demo plays.
const (
	rolloutName  = "web"
	replicas     = 4
	canaryWeight = 25
	historyLimit = 1
	// ownerLabel marks the namespace as the demo's, so a second run may replace it.
	ownerLabel = "demo.configmap-attacher.io/owner"
)

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

// Run plays the canary in a new namespace of the cluster kc and dc reach. It writes the
// timeline to out and returns nil only if every step held; its last line is DEMO PASSED,
// DEMO FAILED (a step did not hold) or DEMO INTERRUPTED (ctx ended: Ctrl-C).
func Run(ctx context.Context, kc kubernetes.Interface, dc dynamic.Interface, out io.Writer, opts Options) error {
	if opts.Namespace == "" {
		opts.Namespace = "demo"
	}
	if opts.StepTimeout == 0 {
		opts.StepTimeout = 90 * time.Second
	}
	p := &player{kc: kc, dc: dc, out: out, ns: opts.Namespace, start: time.Now(), timeout: opts.StepTimeout}
	err := p.play(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		// Ctrl-C: no step failed; the command exits 130 (SIGINT) or 143 (SIGTERM).
		fmt.Fprintf(out, "\nDEMO INTERRUPTED after %d steps (%v)\n", p.steps, context.Cause(ctx))
		return err
	case err != nil:
		fmt.Fprintf(out, "\nDEMO FAILED after %d steps: %v\n", p.steps, err)
		return err
	}
	fmt.Fprintf(out, "\nDEMO PASSED: %d steps held in %.1fs\n", p.steps, time.Since(p.start).Seconds())
	return nil
}

func (p *player) play(ctx context.Context) error {
	if err := p.freshNamespace(ctx); err != nil {
		return err
	}
	p.say("namespace %s: Rollout %q, %d replicas, canary steps setWeight %d then pause, revisionHistoryLimit %d",
		p.ns, rolloutName, replicas, canaryWeight, historyLimit)
	rs1, err := p.revision1(ctx)
	if err != nil {
		return err
	}
	rs2, err := p.canary(ctx, rs1)
	if err != nil {
		return err
	}
	if err := p.spotReplacement(ctx, rs1); err != nil {
		return err
	}
	if err := p.promote(ctx, rs2, rs1); err != nil {
		return err
	}
	if err := p.revision3(ctx, rs1, rs2); err != nil {
		return err
	}
	if err := p.undo(ctx, rs2); err != nil {
		return err
	}
	if err := p.abort(ctx, rs2); err != nil {
		return err
	}
	return p.consistent(ctx)
}

// freshNamespace creates the demo's namespace, replacing one an earlier run left.
func (p *player) freshNamespace(ctx context.Context) error {
	nsc := p.kc.CoreV1().Namespaces()
	old, err := nsc.Get(ctx, p.ns, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("namespace %s: %w", p.ns, err)
	case old.Labels[ownerLabel] != "demo":
		return fmt.Errorf("namespace %s exists and is not the demo's (no label %s): choose another with --namespace", p.ns, ownerLabel)
	default:
		p.say("deleting namespace %s left by an earlier run...", p.ns)
		if err := nsc.Delete(ctx, p.ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting namespace %s: %w", p.ns, err)
		}
		if err := p.wait(ctx, "namespace "+p.ns+" deleted", func() error {
			if _, err := nsc.Get(ctx, p.ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s still there (err %v)", p.ns, err)
			}
			return nil
		}); err != nil {
			return err
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns, Labels: map[string]string{ownerLabel: "demo"}}}
	if _, err := nsc.Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", p.ns, err)
	}
	return p.wait(ctx, "the namespace's default ServiceAccount", func() error {
		_, err := p.kc.CoreV1().ServiceAccounts(p.ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// revision1: the Rollout starts on web-config-1 and becomes Healthy.
func (p *player) revision1(ctx context.Context) (*appsv1.ReplicaSet, error) {
	if err := p.configMap(ctx, "web-config-1", "color: blue"); err != nil {
		return nil, err
	}
	p.say("created ConfigMap web-config-1 (label %s=true)", core.LabelRevision)
	ro, err := rollout("web-config-1")
	if err != nil {
		return nil, err
	}
	if _, err := p.dc.Resource(core.RolloutGVR).Namespace(p.ns).Create(ctx, ro, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating Rollout: %w", err)
	}
	p.say("created Rollout %s using web-config-1", rolloutName)
	rs1, err := p.waitHealthy(ctx, "web-config-1")
	if err != nil {
		return nil, err
	}
	p.ok("revision 1 is stable: the Rollouts controller created ReplicaSet %s, %d/%d Pods Running and Ready (kwok)", rs1.Name, replicas, replicas)
	if err := p.waitOwned(ctx, "web-config-1", rs1); err != nil {
		return nil, err
	}
	p.ok("configmap-attacher made ReplicaSet %s an owner of web-config-1", rs1.Name)
	return rs1, nil
}

// canary: revision 2 arrives; the controller pauses the canary at its weight.
func (p *player) canary(ctx context.Context, rs1 *appsv1.ReplicaSet) (*appsv1.ReplicaSet, error) {
	if err := p.laterSecond(ctx, rs1); err != nil {
		return nil, err
	}
	if err := p.configMap(ctx, "web-config-2", "color: green"); err != nil {
		return nil, err
	}
	if err := argorollouts.SetTemplate(ctx, p.dc, p.ns, rolloutName, podTemplate("web-config-2")); err != nil {
		return nil, err
	}
	p.say("config change: created ConfigMap web-config-2 and pointed the Rollout's template at it")
	rs2, err := p.waitPaused(ctx, "web-config-2", rs1)
	if err != nil {
		return nil, err
	}
	p.ok("revision 2 is a canary paused at %d%%: ReplicaSet %s has %d Ready Pod(s), %s keeps the rest",
		canaryWeight, rs2.Name, *rs2.Spec.Replicas, rs1.Name)
	if err := p.waitOwned(ctx, "web-config-2", rs2); err != nil {
		return nil, err
	}
	p.ok("configmap-attacher made ReplicaSet %s an owner of web-config-2", rs2.Name)
	if err := p.owned("web-config-1", rs1); err != nil {
		return nil, fmt.Errorf("step failed: revision 1 kept its owner: %w", err)
	}
	p.ok("web-config-1 still owned by %s: both revisions live side by side", rs1.Name)
	return rs2, nil
}

// spotReplacement deletes a Pod of the stable ReplicaSet; its replacement finds revision 1.
func (p *player) spotReplacement(ctx context.Context, rs1 *appsv1.ReplicaSet) error {
	pods, err := p.podsOf(ctx, rs1)
	if err != nil || len(pods) == 0 {
		return fmt.Errorf("step failed: Pods of %s: %d (err %v)", rs1.Name, len(pods), err)
	}
	victim := pods[0]
	before := map[types.UID]bool{}
	for _, pod := range pods {
		before[pod.UID] = true
	}
	if err := p.kc.CoreV1().Pods(p.ns).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting Pod %s: %w", victim.Name, err)
	}
	p.say("spot reclaim: Pod %s of the stable ReplicaSet %s is deleted", victim.Name, rs1.Name)
	var replacement corev1.Pod
	if err := p.wait(ctx, "a Ready replacement Pod of "+rs1.Name, func() error {
		pods, err := p.podsOf(ctx, rs1)
		if err != nil {
			return err
		}
		for _, pod := range pods {
			if !before[pod.UID] && argorollouts.PodReady(&pod) {
				replacement = pod
				return nil
			}
		}
		return fmt.Errorf("no new Ready Pod among %d", len(pods))
	}); err != nil {
		return err
	}
	if !argorollouts.UsesConfigMap(replacement.Spec, "web-config-1") {
		return fmt.Errorf("step failed: replacement %s does not use web-config-1: %v", replacement.Name, argorollouts.ConfigMapsOf(replacement.Spec))
	}
	if _, err := p.kc.CoreV1().ConfigMaps(p.ns).Get(ctx, "web-config-1", metav1.GetOptions{}); err != nil {
		return fmt.Errorf("step failed: the replacement Pod's ConfigMap web-config-1: %w", err)
	}
	p.ok("replacement %s is Running and Ready, and its ConfigMap web-config-1 is there (no CreateContainerConfigError)", replacement.Name)
	return nil
}

// promote resumes the canary; revision 2 becomes stable; revision 1 stays in history.
func (p *player) promote(ctx context.Context, rs2, rs1 *appsv1.ReplicaSet) error {
	if err := argorollouts.Promote(ctx, p.dc, p.ns, rolloutName); err != nil {
		return err
	}
	p.say("promote (what `kubectl argo rollouts promote %s` does)", rolloutName)
	if _, err := p.waitHealthy(ctx, "web-config-2"); err != nil {
		return err
	}
	p.ok("revision 2 is stable: %s has %d Ready Pods; %s is scaled to 0 and kept in history", rs2.Name, replicas, rs1.Name)
	if err := p.owned("web-config-1", rs1); err != nil {
		return fmt.Errorf("step failed: revision 1 kept while its ReplicaSet is in history: %w", err)
	}
	p.ok("web-config-1 is kept: %s may still be rolled back to", rs1.Name)
	return nil
}

// revision3: a third revision pushes the first ReplicaSet out of revisionHistoryLimit;
// the controller deletes it and the garbage collector deletes revision 1, nothing else.
func (p *player) revision3(ctx context.Context, rs1, rs2 *appsv1.ReplicaSet) error {
	if err := p.configMap(ctx, "web-config-3", "color: red"); err != nil {
		return err
	}
	if err := argorollouts.SetTemplate(ctx, p.dc, p.ns, rolloutName, podTemplate("web-config-3")); err != nil {
		return err
	}
	p.say("config change: web-config-3")
	rs3, err := p.waitPaused(ctx, "web-config-3", rs2)
	if err != nil {
		return err
	}
	if err := p.waitOwned(ctx, "web-config-3", rs3); err != nil {
		return err
	}
	p.ok("revision 3's canary %s is paused at %d%%, owner of web-config-3", rs3.Name, canaryWeight)
	if err := argorollouts.Promote(ctx, p.dc, p.ns, rolloutName); err != nil {
		return err
	}
	p.say("promote")
	if _, err := p.waitHealthy(ctx, "web-config-3"); err != nil {
		return err
	}
	p.ok("revision 3 is stable")
	if err := p.waitGone(ctx, "ReplicaSet", rs1.Name, func() error {
		_, err := p.kc.AppsV1().ReplicaSets(p.ns).Get(ctx, rs1.Name, metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	p.ok("revisionHistoryLimit %d: the Rollouts controller deleted ReplicaSet %s", historyLimit, rs1.Name)
	if err := p.waitGone(ctx, "ConfigMap", "web-config-1", func() error {
		_, err := p.kc.CoreV1().ConfigMaps(p.ns).Get(ctx, "web-config-1", metav1.GetOptions{})
		return err
	}); err != nil {
		return err
	}
	p.ok("Kubernetes' garbage collector deleted web-config-1: its last owner is gone")
	for _, keep := range []struct {
		cm string
		rs *appsv1.ReplicaSet
	}{{"web-config-2", rs2}, {"web-config-3", rs3}} {
		if err := p.owned(keep.cm, keep.rs); err != nil {
			return fmt.Errorf("step failed: %s survives: %w", keep.cm, err)
		}
	}
	p.ok("web-config-2 (%s, in history) and web-config-3 (%s, stable) are alive", rs2.Name, rs3.Name)
	return nil
}

// undo rolls back to revision 2: the controller reuses its ReplicaSet, which finds its config.
func (p *player) undo(ctx context.Context, rs2 *appsv1.ReplicaSet) error {
	if err := argorollouts.Undo(ctx, p.dc, rs2, rolloutName); err != nil {
		return err
	}
	p.say("undo to revision 2 (what `kubectl argo rollouts undo %s` does: the template of %s back in the Rollout)", rolloutName, rs2.Name)
	if err := p.wait(ctx, "the undo's canary to pause or finish", func() error {
		ro, err := argorollouts.Get(ctx, p.dc, p.ns, rolloutName)
		if err != nil {
			return err
		}
		if st := argorollouts.StatusOf(ro); !st.Observed || st.CurrentPodHash != argorollouts.Hash(rs2) || !(st.Paused || st.Healthy()) {
			return fmt.Errorf("rollout %s", st)
		}
		return nil
	}); err != nil {
		return err
	}
	if err := argorollouts.Promote(ctx, p.dc, p.ns, rolloutName); err != nil {
		return err
	}
	back, err := p.waitHealthy(ctx, "web-config-2")
	if err != nil {
		return err
	}
	if back.UID != rs2.UID {
		return fmt.Errorf("step failed: the controller made a new ReplicaSet %s (%s) instead of reusing %s (%s)", back.Name, back.UID, rs2.Name, rs2.UID)
	}
	p.ok("the controller reused ReplicaSet %s: %d Ready Pods on revision 2 again", rs2.Name, replicas)
	if err := p.owned("web-config-2", rs2); err != nil {
		return fmt.Errorf("step failed: revision 2 found after the undo: %w", err)
	}
	p.ok("web-config-2 was there all along, still owned by %s", rs2.Name)
	return nil
}

// abort starts a canary of revision 4 and aborts it: the stable ReplicaSet keeps its config.
func (p *player) abort(ctx context.Context, stable *appsv1.ReplicaSet) error {
	if err := p.configMap(ctx, "web-config-4", "color: purple"); err != nil {
		return err
	}
	if err := argorollouts.SetTemplate(ctx, p.dc, p.ns, rolloutName, podTemplate("web-config-4")); err != nil {
		return err
	}
	p.say("config change: web-config-4")
	rs4, err := p.waitPaused(ctx, "web-config-4", stable)
	if err != nil {
		return err
	}
	if err := p.waitOwned(ctx, "web-config-4", rs4); err != nil {
		return err
	}
	p.ok("revision 4's canary %s is paused at %d%%, owner of web-config-4", rs4.Name, canaryWeight)
	if err := argorollouts.Abort(ctx, p.dc, p.ns, rolloutName); err != nil {
		return err
	}
	p.say("abort (what `kubectl argo rollouts abort %s` does)", rolloutName)
	if err := p.wait(ctx, "the abort to scale the canary down and the stable back up", func() error {
		return p.aborted(ctx, rs4, stable)
	}); err != nil {
		return err
	}
	p.ok("aborted: %s is scaled to 0, the stable %s has %d Ready Pods", rs4.Name, stable.Name, replicas)
	if err := p.owned("web-config-2", stable); err != nil {
		return fmt.Errorf("step failed: the stable keeps its config: %w", err)
	}
	p.ok("the stable's web-config-2 is intact; web-config-4 stays with %s until it leaves history", rs4.Name)
	return nil
}

func (p *player) aborted(ctx context.Context, canary, stable *appsv1.ReplicaSet) error {
	ro, err := argorollouts.Get(ctx, p.dc, p.ns, rolloutName)
	if err != nil {
		return err
	}
	if st := argorollouts.StatusOf(ro); !st.Aborted {
		return fmt.Errorf("rollout %s", st)
	}
	c, err := p.kc.AppsV1().ReplicaSets(p.ns).Get(ctx, canary.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if *c.Spec.Replicas != 0 || c.Status.Replicas != 0 {
		return fmt.Errorf("canary %s still has %d/%d replicas", c.Name, c.Status.Replicas, *c.Spec.Replicas)
	}
	s, err := p.kc.AppsV1().ReplicaSets(p.ns).Get(ctx, stable.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if s.Status.ReadyReplicas != replicas {
		return fmt.Errorf("stable %s has %d Ready replicas", s.Name, s.Status.ReadyReplicas)
	}
	return nil
}

// consistent checks what the demo leaves: every ConfigMap the Rollout or one of its
// ReplicaSets names exists, and every revision left is owned by a live ReplicaSet.
func (p *player) consistent(ctx context.Context) error {
	ro, err := argorollouts.Get(ctx, p.dc, p.ns, rolloutName)
	if err != nil {
		return err
	}
	names, err := templateConfigMaps(ro)
	if err != nil {
		return err
	}
	rss, err := p.kc.AppsV1().ReplicaSets(p.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	live := map[string]bool{}
	for _, rs := range rss.Items {
		live[string(rs.UID)] = true
		names = append(names, argorollouts.ConfigMapsOf(rs.Spec.Template.Spec)...)
	}
	for _, n := range names {
		if _, err := p.kc.CoreV1().ConfigMaps(p.ns).Get(ctx, n, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("step failed: ConfigMap %s (used by the Rollout or a ReplicaSet): %w", n, err)
		}
	}
	cms, err := p.kc.CoreV1().ConfigMaps(p.ns).List(ctx, metav1.ListOptions{LabelSelector: core.LabelRevision + "=true"})
	if err != nil {
		return err
	}
	for _, cm := range cms.Items {
		owned := false
		for _, o := range cm.OwnerReferences {
			owned = owned || live[string(o.UID)]
		}
		if !owned {
			return fmt.Errorf("step failed: revision %s has no live owner: %v", cm.Name, cm.OwnerReferences)
		}
	}
	p.ok("consistent: %d ReplicaSets, %d revisions, each owned by a live ReplicaSet; nothing used is missing", len(rss.Items), len(cms.Items))
	return nil
}

var errNotGone = errors.New("still there")

// laterSecond waits until the clock is past the second rs was created in. The Rollouts
// controller drops the oldest ReplicaSets beyond revisionHistoryLimit by creation time,
// which has a resolution of one second (ties go by name); a person's edits are never
// that close, the demo's are.
func (p *player) laterSecond(ctx context.Context, rs *appsv1.ReplicaSet) error {
	return p.wait(ctx, "a creation time after "+rs.Name+"'s", func() error {
		if time.Now().Unix() <= rs.CreationTimestamp.Unix() {
			return fmt.Errorf("still the second %s was created in", rs.Name)
		}
		return nil
	})
}
