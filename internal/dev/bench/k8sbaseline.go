package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argoevents"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
)

// K8sSemantics is what the argo-k8s baseline (Argo Events' standard k8s trigger
// patching an ownerReference in) did in four cases configmap-attacher's safety rules
// cover. Each is observed on the live cluster, not read from the code.
type K8sSemantics struct {
	// ForeignOwnerKept: a revision already owned by another live ReplicaSet still lists
	// that owner after the trigger added the new one (rule 3: never remove another owner).
	ForeignOwnerKept bool `json:"foreignOwnerKept"`
	// OwnersAfter are the owner names of that revision after the trigger ran.
	OwnersAfter []string `json:"ownersAfter"`
	// UnlabelledPatched: a ConfigMap without the opt-in label got the ownerReference
	// (rule 4: never touched).
	UnlabelledPatched bool `json:"unlabelledPatched"`
	// MissingCreated: a ConfigMap the ReplicaSet references but that does not exist was
	// created by the trigger (an empty object owned by the ReplicaSet).
	MissingCreated bool `json:"missingCreated"`
	// DeadOwnerRevisionDeleted: a ReplicaSet deleted right after its creation still got
	// its revision patched, and the revision was then deleted by the garbage collector
	// (rule 2: never attach to a ReplicaSet that is gone).
	DeadOwnerRevisionDeleted bool `json:"deadOwnerRevisionDeleted"`
	// DeadOwnerPatched: the trigger wrote the dead ReplicaSet's UID into the revision
	// (seen by a watch, or implied by the deletion).
	DeadOwnerPatched bool `json:"deadOwnerPatched"`
	// WaitedSeconds is how long the probe waited for the four outcomes.
	WaitedSeconds float64 `json:"waitedSeconds"`
}

// Summary is the table cell.
func (k *K8sSemantics) Summary() string {
	yn := func(b bool, yes, no string) string {
		if b {
			return yes
		}
		return no
	}
	return strings.Join([]string{
		yn(k.ForeignOwnerKept, "other owner kept", "other owner DROPPED (owners after: "+strings.Join(k.OwnersAfter, ",")+")"),
		yn(k.UnlabelledPatched, "unlabelled CM PATCHED", "unlabelled CM untouched"),
		yn(k.MissingCreated, "missing CM CREATED", "missing CM not created"),
		yn(k.DeadOwnerRevisionDeleted, "RS deleted at once: revision DELETED by the GC",
			yn(k.DeadOwnerPatched, "RS deleted at once: dead owner written", "RS deleted at once: revision kept")),
	}, "; ")
}

// k8sSemantics runs the four cases in ns (watched by the argo-k8s pipeline) and waits up
// to Settle (at most 45 s) for their outcomes.
func (e *env) k8sSemantics(ctx context.Context, ns string) (*K8sSemantics, error) {
	cms, rss := e.kc.CoreV1().ConfigMaps(ns), e.kc.AppsV1().ReplicaSets(ns)
	// The other owner: a live ReplicaSet the EventSource does not report (no
	// pod-template-hash label), so no trigger runs for it.
	other := replicaSet(ns, "sem-other-owner", "sem-none")
	l := map[string]string{"app": "bench-sem-other"}
	other.Labels, other.Spec.Selector.MatchLabels, other.Spec.Template.Labels = l, l, l
	other, err := rss.Create(ctx, other, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating the other owner: %w", err)
	}
	no := false
	shared := revision(ns, "sem-shared", 0, nil)
	shared.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: other.Name, UID: other.UID, Controller: &no}}
	unlabelled := revision(ns, "sem-unlabelled", 0, nil)
	unlabelled.Labels = nil
	for _, cm := range []*corev1.ConfigMap{shared, unlabelled, revision(ns, "sem-dead", 0, nil)} {
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating ConfigMap %s: %w", cm.Name, err)
		}
	}
	uids := map[string]types.UID{}
	for _, c := range [][2]string{{"sem-rs-shared", "sem-shared"}, {"sem-rs-unlabelled", "sem-unlabelled"}, {"sem-rs-missing", "sem-missing"}, {"sem-rs-dead", "sem-dead"}} {
		rs, err := rss.Create(ctx, replicaSet(ns, c[0], c[1]), metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("creating ReplicaSet %s: %w", c[0], err)
		}
		uids[c[0]] = rs.UID
	}
	// Gone before any trigger could act on its ADD (the event still arrives).
	bg := metav1.DeletePropagationBackground
	if err := rss.Delete(ctx, "sem-rs-dead", metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		return nil, fmt.Errorf("deleting sem-rs-dead: %w", err)
	}
	ownedBy := func(cm *corev1.ConfigMap, rs string) bool {
		for _, o := range cm.OwnerReferences {
			if o.UID == uids[rs] {
				return true
			}
		}
		return false
	}
	k := &K8sSemantics{}
	start := time.Now()
	wait := min(e.cfg.Settle, 45*time.Second)
	var sharedDone, unlabelledDone, deadDone bool
	for time.Since(start) < wait && ctx.Err() == nil {
		if !sharedDone {
			if cm, err := cms.Get(ctx, "sem-shared", metav1.GetOptions{}); err == nil && ownedBy(cm, "sem-rs-shared") {
				sharedDone = true
				k.OwnersAfter = nil
				for _, o := range cm.OwnerReferences {
					k.OwnersAfter = append(k.OwnersAfter, o.Name)
					if o.UID == other.UID {
						k.ForeignOwnerKept = true
					}
				}
			}
		}
		if !unlabelledDone {
			if cm, err := cms.Get(ctx, "sem-unlabelled", metav1.GetOptions{}); err == nil && ownedBy(cm, "sem-rs-unlabelled") {
				unlabelledDone, k.UnlabelledPatched = true, true
			}
		}
		if !k.MissingCreated {
			if _, err := cms.Get(ctx, "sem-missing", metav1.GetOptions{}); err == nil {
				k.MissingCreated = true
			}
		}
		if !deadDone {
			cm, err := cms.Get(ctx, "sem-dead", metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				deadDone, k.DeadOwnerRevisionDeleted, k.DeadOwnerPatched = true, true, true
			case err == nil && ownedBy(cm, "sem-rs-dead"):
				k.DeadOwnerPatched = true // the GC has not acted yet
			}
		}
		if sharedDone && unlabelledDone && k.MissingCreated && deadDone {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	k.WaitedSeconds = time.Since(start).Seconds()
	e.cfg.Logf("   argo-k8s semantics (%.0fs): %s", k.WaitedSeconds, k.Summary())
	return k, ctx.Err()
}

// k8sSemanticsWith starts the argo-k8s pipeline with patchStrategy on a namespace of its
// own and runs only the four semantics cases (no latency run): the other patch strategy
// than the measured path's, in the same run.
func (e *env) k8sSemanticsWith(ctx context.Context, strategy string, rep *Report) error {
	ns := "bench-argo-k8s-sem"
	if err := e.ensureNamespace(ctx, ns); err != nil {
		return err
	}
	bus, err := natsserver.Start(ctx, natsserver.Options{})
	if err != nil {
		return fmt.Errorf("NATS for Argo Events: %w", err)
	}
	defer bus.Stop()
	sensor, err := argoevents.K8sPatchSensor(strategy)
	if err != nil {
		return err
	}
	logDir := filepath.Join(e.logDir, "argo-events-k8s-sem")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fmt.Errorf("argo events log dir: %w", err)
	}
	pipe, err := argoevents.StartPipeline(ctx, argoevents.PipelineOptions{EventBusURL: bus.ClientURL(), Kubeconfig: e.cp.Kubeconfig(),
		Namespace: ns, Sensors: []*v1alpha1.Sensor{sensor}, LogDir: logDir})
	if err != nil {
		return err
	}
	defer func() { _ = pipe.Stop() }()
	k, err := e.k8sSemantics(ctx, ns)
	if err != nil {
		return err
	}
	rep.K8sOther = &K8sVariant{PatchStrategy: strategy, Semantics: k}
	return nil
}

// K8sVariant is the argo-k8s semantics under the other patch strategy.
type K8sVariant struct {
	PatchStrategy string        `json:"patchStrategy"`
	Semantics     *K8sSemantics `json:"semantics"`
}
