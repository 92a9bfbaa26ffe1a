package core_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

func specOptions(t *testing.T, spec map[string]string) core.Options {
	t.Helper()
	o, err := core.ParseSpec(spec)
	require.NoError(t, err)
	return o
}

// Rule 4: a name that comes with an event is attached only when the object is opted
// in, the ReplicaSet's pod template references it, or a workload, ReplicaSet or
// template annotation lists it. Anything else is skipped with the reason, unwritten.
func TestEventNamesAreUntrusted(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.configMap("plain", nil)           // unlabelled, used by no template
	e.configMap("mounted", nil)         // unlabelled, the template mounts it
	e.configMap("rs-listed", nil)       // unlabelled, the ReplicaSet's annotation lists it
	e.configMap("template-listed", nil) // unlabelled, the template's annotation lists it
	e.configMap("workload-listed", nil) // unlabelled, the Rollout's annotation lists it
	e.revision("opted-in")              // labelled, used by no template
	e.configMap("other-team", map[string]string{core.LabelRevision: "true", "team": "b"})
	ro := e.rollout("web", map[string]string{core.AnnotationConfigMaps: "workload-listed"})
	own := rolloutOwner(ro)
	rs := e.replicaSet("web-1", &own, podTemplate("web", "mounted"), func(rs *appsv1.ReplicaSet) {
		rs.Annotations = map[string]string{core.AnnotationConfigMaps: "rs-listed"}
		rs.Spec.Template.Annotations = map[string]string{core.AnnotationConfigMaps: "template-listed"}
	})

	cases := []struct {
		name       string
		spec       map[string]string
		configMap  string
		want       core.Outcome
		wantReason string
	}{
		{"unlabelled and unreferenced: skipped", map[string]string{"configMaps": "plain"}, "plain", core.OutcomeSkipped, "comes only with the event"},
		{"unlabelled and unreferenced, discovery off: skipped", map[string]string{"configMaps": "plain", "discover": "false"}, "plain", core.OutcomeSkipped, "comes only with the event"},
		{"a selector does not widen it", map[string]string{"configMaps": "plain", "selector": "!nothing"}, "plain", core.OutcomeSkipped, "comes only with the event"},
		{"the template references it: attached", map[string]string{"configMaps": "mounted"}, "mounted", core.OutcomeAttached, ""},
		{"the template references it, discovery off: attached", map[string]string{"configMaps": "mounted", "discover": "false"}, "mounted", core.OutcomeAttached, ""},
		{"opted in: attached", map[string]string{"configMaps": "opted-in"}, "opted-in", core.OutcomeAttached, ""},
		{"opted in but outside the selector: skipped", map[string]string{"configMaps": "other-team", "selector": "team=a"}, "other-team", core.OutcomeSkipped, "selector"},
		{"the ReplicaSet's annotation lists it: attached", nil, "rs-listed", core.OutcomeAttached, ""},
		{"the template's annotation lists it: attached", nil, "template-listed", core.OutcomeAttached, ""},
		{"the workload's annotation lists it: attached", nil, "workload-listed", core.OutcomeAttached, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := specOptions(t, tc.spec)
			opts.DryRun = true
			e.counter.Reset()
			res, err := e.attacher.Attach(ctx, e.event(rs, opts))
			require.NoError(t, err)
			got := resultFor(res, core.KindConfigMap, tc.configMap)
			want := tc.want
			if want == core.OutcomeAttached {
				want = core.OutcomeWouldAttach
			}
			assert.Equal(t, want, got.Outcome, "%+v", res.Objects)
			assert.Contains(t, got.Reason, tc.wantReason)
			assert.Zero(t, e.counter.Writes())
		})
	}

	t.Run("only the listed and the annotated are written", func(t *testing.T) {
		_, err := e.attacher.Attach(ctx, e.event(rs, specOptions(t, map[string]string{"configMaps": "plain,mounted"})))
		require.NoError(t, err)
		assert.Empty(t, e.owners(core.KindConfigMap, "plain"))
		for _, cm := range []string{"mounted", "rs-listed", "template-listed", "workload-listed"} {
			assert.Contains(t, ownerUIDs(e.owners(core.KindConfigMap, cm)), rs.UID, cm)
		}
	})
}

// Rule 4 with the worst defaults (no namespace excluded): an event for a ReplicaSet in
// kube-system that names the apiserver's own ConfigMap never touches it; and the
// default exclusions refuse the event before anything is read.
func TestKubeSystemConfigMapNeverTouched(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const victim = "extension-apiserver-authentication" // written by kube-apiserver itself
	before, err := e.kc.CoreV1().ConfigMaps("kube-system").Get(ctx, victim, metav1.GetOptions{})
	require.NoError(t, err)
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": e.ns}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
	rs, err := e.kc.AppsV1().ReplicaSets("kube-system").Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: e.ns},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = e.kc.AppsV1().ReplicaSets("kube-system").Delete(context.Background(), rs.Name, metav1.DeleteOptions{})
	})
	ev := core.Event{Namespace: "kube-system", Name: rs.Name, UID: rs.UID}

	for _, spec := range []map[string]string{
		{"configMaps": victim},
		{"configMaps": victim, "discover": "false"},
		{"configMaps": victim, "selector": "!nothing"},
	} {
		ev.Options = specOptions(t, spec)
		e.counter.Reset()
		res, err := e.attacher.Attach(ctx, ev)
		require.NoError(t, err)
		assert.Equal(t, core.OutcomeSkipped, resultFor(res, core.KindConfigMap, victim).Outcome, "%v: %+v", spec, res.Objects)
		assert.Zero(t, e.counter.Writes(), "%v", spec)
	}
	after, err := e.kc.CoreV1().ConfigMaps("kube-system").Get(ctx, victim, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "the ConfigMap is unchanged")
	assert.Empty(t, after.OwnerReferences)

	policy, err := core.ParseNamespacePolicy(nil, core.DefaultExcludedNamespaces("configmap-attacher"))
	require.NoError(t, err)
	guarded, err := core.NewAttacher(core.Config{Client: e.kc, Reader: core.LiveReader{Client: e.kc}, Namespaces: policy, Logger: testfix.Quiet()})
	require.NoError(t, err)
	_, err = guarded.Attach(ctx, ev)
	require.ErrorIs(t, err, core.ErrRefused)
	assert.Contains(t, err.Error(), "kube-system")
}
