package core_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

var sharedCP *controlplane.ControlPlane

// TestMain starts the control plane with the workload controllers whose objects can use
// a revision besides ReplicaSets (their ControllerRevisions, Jobs and Pods are real), and
// the OwnerReferencesPermissionEnforcement admission plugin that many distributions
// enable (blockOwnerDeletion needs a right on the owner's finalizers).
func TestMain(m *testing.M) {
	controllers := append(slices.Clone(controlplane.DefaultControllers),
		"statefulset-controller", "daemonset-controller", "job-controller", "cronjob-controller")
	os.Exit(controlplane.TestMainWith(m, &sharedCP, controlplane.Options{Controllers: controllers,
		APIServerArgs: []string{"--enable-admission-plugins=OwnerReferencesPermissionEnforcement"}}))
}

func requireCP(t *testing.T) *controlplane.ControlPlane { return controlplane.Require(t, sharedCP) }

// The real garbage collector deletes a revision once its only owner is gone, and keeps
// a revision shared by two ReplicaSets until both are gone.
func TestAttachThenGarbageCollector(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ro := e.rollout("web", nil)
	own := rolloutOwner(ro)
	e.revision("web-config-1")
	e.revision("shared-config")
	rs1 := e.replicaSet("web-1", &own, podTemplate("web", "web-config-1", "shared-config"))
	rs2 := e.replicaSet("web-2", &own, podTemplate("web", "shared-config"))

	res, err := e.attacher.Attach(ctx, e.event(rs1, core.DefaultOptions()))
	require.NoError(t, err)
	require.Equal(t, &core.WorkloadRef{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "web"}, res.Workload)
	for _, o := range res.Objects {
		require.Equal(t, core.OutcomeAttached, o.Outcome, "%s %s: %s", o.Kind, o.Name, o.Reason)
	}
	// Every user protects a revision (issue 16): web-2 uses shared-config too, so the
	// first attach already made it an owner, and web-2's own event writes nothing.
	assert.Equal(t, []string{"ReplicaSet/web-1", "ReplicaSet/web-2"}, resultFor(res, core.KindConfigMap, "shared-config").Owners)
	res, err = e.attacher.Attach(ctx, e.event(rs2, core.DefaultOptions()))
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeAlreadyAttached, outcomes(res)["ConfigMap/shared-config"])
	assert.ElementsMatch(t, []types.UID{rs1.UID, rs2.UID}, ownerUIDs(e.owners(core.KindConfigMap, "shared-config")))
	ref := e.owners(core.KindConfigMap, "web-config-1")[0]
	assert.Equal(t, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: rs1.UID, Controller: ptr(false)}, ref,
		"rule 3: a non-controller owner, blockOwnerDeletion off by default")

	require.NoError(t, e.kc.AppsV1().ReplicaSets(e.ns).Delete(ctx, rs1.Name, metav1.DeleteOptions{}))
	controlplane.Eventually(t, 60*time.Second, "the garbage collector to delete web-config-1", func() error {
		_, err := e.kc.CoreV1().ConfigMaps(e.ns).Get(ctx, "web-config-1", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (err %v)", err)
	})
	// By now the GC has processed rs1's deletion: the shared revision must survive.
	cm, err := e.kc.CoreV1().ConfigMaps(e.ns).Get(ctx, "shared-config", metav1.GetOptions{})
	require.NoError(t, err, "a revision still used by web-2 must survive")
	assert.Contains(t, ownerUIDs(cm.OwnerReferences), rs2.UID)

	require.NoError(t, e.kc.AppsV1().ReplicaSets(e.ns).Delete(ctx, rs2.Name, metav1.DeleteOptions{}))
	controlplane.Eventually(t, 60*time.Second, "the garbage collector to delete shared-config", func() error {
		_, err := e.kc.CoreV1().ConfigMaps(e.ns).Get(ctx, "shared-config", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (err %v)", err)
	})
}

// Rules 3 and 5: other owners survive, and a replayed event writes nothing.
func TestAttachKeepsOwnersAndIsIdempotent(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ro := e.rollout("api", nil)
	own := rolloutOwner(ro)
	other := metav1.OwnerReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "api", UID: ro.GetUID(), Controller: ptr(true)}
	e.configMap("api-config", map[string]string{core.LabelRevision: "true"}, other)
	rs := e.replicaSet("api-1", &own, podTemplate("api", "api-config"))

	res, err := e.attacher.Attach(ctx, e.event(rs, core.DefaultOptions()))
	require.NoError(t, err)
	require.Equal(t, core.OutcomeAttached, outcomes(res)["ConfigMap/api-config"])
	refs := e.owners(core.KindConfigMap, "api-config")
	require.Len(t, refs, 2)
	assert.Contains(t, refs, other, "the existing controller owner is untouched")

	e.counter.Reset()
	for i := 0; i < 5; i++ {
		res, err = e.attacher.Attach(ctx, e.event(rs, core.DefaultOptions()))
		require.NoError(t, err)
		require.Equal(t, core.OutcomeAlreadyAttached, outcomes(res)["ConfigMap/api-config"])
	}
	assert.Zero(t, e.counter.Writes(), "a replayed event must make no write")
	assert.Len(t, e.owners(core.KindConfigMap, "api-config"), 2)
}

// Rule 6: a writer changing the ConfigMap's data at the same time loses nothing, and
// every attach succeeds. The ReplicaSets name the revision in the event only (their
// templates do not mount it), so that each attach writes its own owner concurrently.
func TestAttachConcurrentWriters(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ro := e.rollout("busy", nil)
	own := rolloutOwner(ro)
	e.revision("busy-config")
	var sets []*appsv1.ReplicaSet
	for i := 0; i < 8; i++ {
		sets = append(sets, e.replicaSet(fmt.Sprintf("busy-%d", i), &own, podTemplate("busy")))
	}
	listed := specOptions(t, map[string]string{"configMaps": "busy-config"})

	var wg sync.WaitGroup
	var lastWritten int
	wg.Add(1)
	go func() { // the concurrent writer: read-modify-write of data with optimistic concurrency
		defer wg.Done()
		for i := 1; ctx.Err() == nil && i <= 200; i++ {
			cm, err := e.kc.CoreV1().ConfigMaps(e.ns).Get(ctx, "busy-config", metav1.GetOptions{})
			if err != nil {
				return
			}
			cm = cm.DeepCopy()
			cm.Data[fmt.Sprintf("key-%d", i)] = fmt.Sprint(i)
			if _, err := e.kc.CoreV1().ConfigMaps(e.ns).Update(ctx, cm, metav1.UpdateOptions{}); err == nil {
				lastWritten = i
			}
		}
	}()
	var attachErrs []error
	var mu sync.Mutex
	for _, rs := range sets {
		wg.Add(1)
		go func(rs *appsv1.ReplicaSet) {
			defer wg.Done()
			res, err := e.attacher.Attach(ctx, e.event(rs, listed))
			if err == nil && outcomes(res)["ConfigMap/busy-config"] != core.OutcomeAttached {
				err = fmt.Errorf("%s: %v", rs.Name, res.Objects)
			}
			mu.Lock()
			attachErrs = append(attachErrs, err)
			mu.Unlock()
		}(rs)
	}
	wg.Wait()
	require.NoError(t, errors.Join(attachErrs...))
	cm, err := e.kc.CoreV1().ConfigMaps(e.ns).Get(context.Background(), "busy-config", metav1.GetOptions{})
	require.NoError(t, err)
	uids := ownerUIDs(cm.OwnerReferences)
	for _, rs := range sets {
		assert.Contains(t, uids, rs.UID)
	}
	assert.Len(t, cm.OwnerReferences, len(sets))
	assert.Equal(t, fmt.Sprint(lastWritten), cm.Data[fmt.Sprintf("key-%d", lastWritten)], "the other writer's data survives")
	assert.Equal(t, "revision: busy-config", cm.Data["config.yaml"])
}

// Rules 1, 2 and 4: each refusal has its reason and changes nothing.
func TestAttachRefusals(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ro := e.rollout("shop", nil)
	own := rolloutOwner(ro)
	e.revision("shop-config")
	e.configMap("unlabeled", nil)
	rs := e.replicaSet("shop-1", &own, podTemplate("shop", "shop-config", "unlabeled"))
	term := e.replicaSet("shop-old", &own, podTemplate("shop", "shop-config"), func(rs *appsv1.ReplicaSet) {
		rs.Finalizers = []string{"test.configmap-attacher.io/hold"}
	})
	require.NoError(t, e.kc.AppsV1().ReplicaSets(e.ns).Delete(ctx, term.Name, metav1.DeleteOptions{}))
	t.Cleanup(func() {
		_, _ = e.kc.AppsV1().ReplicaSets(e.ns).Patch(context.Background(), term.Name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})

	withSpec := func(spec map[string]string) core.Options {
		o, err := core.ParseSpec(spec)
		require.NoError(t, err)
		return o
	}
	cases := []struct {
		name    string
		ev      core.Event
		wantErr error
		check   func(t *testing.T, res core.Result)
	}{
		{name: "forged UID", ev: core.Event{Namespace: e.ns, Name: rs.Name, UID: "0d9e2c8a-0000-4000-8000-000000000000", Options: core.DefaultOptions()}, wantErr: core.ErrRefused},
		{name: "terminating ReplicaSet", ev: e.event(term, core.DefaultOptions()), wantErr: core.ErrRefused},
		{name: "ReplicaSet gone", ev: core.Event{Namespace: e.ns, Name: "never-existed", Options: core.DefaultOptions()}, wantErr: core.ErrRefused},
		{name: "name not a valid object name", ev: core.Event{Namespace: e.ns, Name: "Bad_Name", Options: core.DefaultOptions()}, wantErr: core.ErrInvalid},
		{name: "spec namespace differs", ev: e.event(rs, withSpec(map[string]string{"namespace": "kube-system"})), wantErr: core.ErrRefused},
		{name: "unlabeled ConfigMap is skipped, labelled one would attach (dry run)", ev: e.event(rs, withSpec(map[string]string{"dryRun": "true"})),
			check: func(t *testing.T, res core.Result) {
				o := outcomes(res)
				assert.Equal(t, core.OutcomeSkipped, o["ConfigMap/unlabeled"])
				assert.Equal(t, core.OutcomeWouldAttach, o["ConfigMap/shop-config"])
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.counter.Reset()
			res, err := e.attacher.Attach(ctx, tc.ev)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			if tc.check != nil {
				tc.check(t, res)
			}
			assert.Zero(t, e.counter.Writes(), "a refused or dry-run event writes nothing")
			assert.Empty(t, e.owners(core.KindConfigMap, "shop-config"))
			assert.Empty(t, e.owners(core.KindConfigMap, "unlabeled"))
		})
	}

	t.Run("cross-namespace name in the spec is invalid", func(t *testing.T) {
		_, err := core.ParseSpec(map[string]string{"configMaps": "kube-system/coredns"})
		require.ErrorIs(t, err, core.ErrInvalid)
		var fe *core.FieldError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, "configMaps", fe.Field)
	})
	t.Run("cross-namespace name in an annotation is skipped", func(t *testing.T) {
		rs := e.replicaSet("shop-ann", &own, podTemplate("shop"), func(rs *appsv1.ReplicaSet) {
			rs.Spec.Template.Annotations = map[string]string{core.AnnotationConfigMaps: "kube-system/coredns"}
		})
		e.counter.Reset()
		res, err := e.attacher.Attach(ctx, e.event(rs, core.DefaultOptions()))
		require.NoError(t, err)
		require.Len(t, res.Objects, 1)
		assert.Equal(t, core.OutcomeSkipped, res.Objects[0].Outcome)
		assert.Contains(t, res.Objects[0].Reason, "cross-namespace")
		assert.Zero(t, e.counter.Writes())
	})
}

// Names a workload annotation lists need no label, names an event lists do (rule 4,
// changed with issue 16: they used to need none) unless a trusted Go caller lists them;
// Secrets need both switches; skip wins; an optional missing reference is reported as such.
func TestAttachSelection(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ro := e.rollout("pay", map[string]string{core.AnnotationConfigMaps: "pay-extra"})
	own := rolloutOwner(ro)
	e.configMap("pay-extra", nil)
	e.configMap("pay-listed", nil)
	e.configMap("pay-skip", map[string]string{core.LabelRevision: "true"})
	_, err := e.kc.CoreV1().ConfigMaps(e.ns).Patch(ctx, "pay-skip", types.MergePatchType, []byte(`{"metadata":{"annotations":{"configmap-attacher.io/skip":"true"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	_, err = e.kc.CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pay-secret", Labels: map[string]string{core.LabelRevision: "true"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tmpl := podTemplate("pay", "pay-skip")
	tmpl.Spec.Volumes = append(tmpl.Spec.Volumes,
		corev1.Volume{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "pay-secret"}}},
		corev1.Volume{Name: "opt", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "pay-optional"}, Optional: ptr(true)}}})
	rs := e.replicaSet("pay-1", &own, tmpl)

	opts, err := core.ParseSpec(map[string]string{"configMaps": "pay-listed"})
	require.NoError(t, err)
	res, err := e.attacher.Attach(ctx, e.event(rs, opts))
	require.NoError(t, err)
	assert.Equal(t, map[string]core.Outcome{
		"ConfigMap/pay-listed":   core.OutcomeSkipped,
		"ConfigMap/pay-extra":    core.OutcomeAttached,
		"ConfigMap/pay-skip":     core.OutcomeSkipped,
		"Secret/pay-secret":      core.OutcomeSkipped,
		"ConfigMap/pay-optional": core.OutcomeMissingOptional,
	}, outcomes(res))
	assert.Empty(t, e.owners(core.KindSecret, "pay-secret"), "Secrets untouched unless enabled")
	assert.Empty(t, e.owners(core.KindConfigMap, "pay-listed"), "an event's name alone opts nothing in")

	opts.TrustListedNames = true // the one-shot command's own command line
	res, err = e.attacher.Attach(ctx, e.event(rs, opts))
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeAttached, outcomes(res)["ConfigMap/pay-listed"])

	opts, err = core.ParseSpec(map[string]string{"includeSecrets": "true"})
	require.NoError(t, err)
	res, err = e.attacher.Attach(ctx, e.event(rs, opts))
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeAttached, outcomes(res)["Secret/pay-secret"])
	assert.Equal(t, []types.UID{rs.UID}, ownerUIDs(e.owners(core.KindSecret, "pay-secret")))
}

// A workload's skip annotation stops everything.
func TestAttachWorkloadSkip(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ro := e.rollout("legacy", map[string]string{core.AnnotationSkip: "true"})
	own := rolloutOwner(ro)
	e.revision("legacy-config")
	rs := e.replicaSet("legacy-1", &own, podTemplate("legacy", "legacy-config"))
	e.counter.Reset()
	res, err := e.attacher.Attach(ctx, e.event(rs, core.DefaultOptions()))
	require.NoError(t, err)
	assert.Contains(t, res.Skipped, "workload")
	assert.Zero(t, e.counter.Writes())
}

// The Deployment path, with the real Deployment controller creating the ReplicaSet.
func TestAttachDeployment(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.revision("dep-config")
	tmpl := podTemplate("dep", "dep-config")
	d, err := e.kc.AppsV1().Deployments(e.ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "dep"},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var rs *appsv1.ReplicaSet
	controlplane.Eventually(t, 30*time.Second, "the Deployment controller to create the ReplicaSet", func() error {
		rs, err = core.CurrentReplicaSet(ctx, e.kc, e.dc, "Deployment", e.ns, d.Name)
		return err
	})
	res, err := e.attacher.Attach(ctx, e.event(rs, core.DefaultOptions()))
	require.NoError(t, err)
	assert.Equal(t, "Deployment", res.Workload.Kind)
	assert.Equal(t, core.OutcomeAttached, outcomes(res)["ConfigMap/dep-config"])
}
