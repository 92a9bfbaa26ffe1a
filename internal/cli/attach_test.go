package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

var sharedCP *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.TestMain(m, &sharedCP)) }

var seq atomic.Int64

func run(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = cli.Main(ctx, args, cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

func newNamespace(t *testing.T, cp *controlplane.ControlPlane) string {
	t.Helper()
	ns := fmt.Sprintf("cli-%d", seq.Add(1))
	_, err := cp.Client().CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return ns
}

// The old Job's exact arguments and environment attach the listed ConfigMaps to the
// Rollout's current ReplicaSet, even when that ReplicaSet appears after the command
// starts (the old Job raced it), and keep existing owners.
func TestLegacyJobArguments(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ctx := context.Background()
	kc := cp.Client()
	dc := dynamic.NewForConfigOrDie(cp.RESTConfig())
	ns := newNamespace(t, cp)
	t.Setenv("KUBECONFIG", cp.Kubeconfig())
	t.Setenv("IS_IN_CLUSTER", "false")
	t.Setenv("LOG_LEVEL", "debug")
	t.Setenv("JOB_NAME", "attach-hook")
	t.Setenv("VERSION", "v0.1.0")

	for _, name := range []string{"app-a", "app-b"} { // no opt-in label: the old Job listed names by hand
		_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	ro, err := dc.Resource(core.RolloutGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "metadata": map[string]any{"name": "app"},
		"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "app"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "app"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "app:2"}}}}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)

	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := run(ctx, "-rollout", "app", "-namespace", ns, "-configmaps", "app-a,app-b")
		done <- result{code, out, errOut}
	}()

	// The Rollout controller's part, played after the command has started: the new
	// ReplicaSet appears, then the Rollout's status names its pod hash.
	time.Sleep(1500 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("the command returned before the ReplicaSet existed: %+v", r)
	default:
	}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "app", core.RolloutHashLabel: "7f9c"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:2"}}}}
	zero := int32(0)
	isCtrl := true
	old, err := kc.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "app-5b6d", Labels: map[string]string{"app": "app", core.RolloutHashLabel: "5b6d"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "app", UID: ro.GetUID(), Controller: &isCtrl}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "app", core.RolloutHashLabel: "5b6d"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "app", core.RolloutHashLabel: "5b6d"}}, Spec: tmpl.Spec}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	rs, err := kc.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "app-7f9c", Labels: tmpl.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "app", UID: ro.GetUID(), Controller: &isCtrl}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// An existing owner on app-a (the old ReplicaSet) must survive: the old Job replaced the list.
	_, err = kc.CoreV1().ConfigMaps(ns).Patch(ctx, "app-a", "application/strategic-merge-patch+json",
		[]byte(fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":%q,"uid":%q}]}}`, old.Name, old.UID)), metav1.PatchOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedField(ro.Object, map[string]any{
		"observedGeneration": fmt.Sprint(ro.GetGeneration()), "currentPodHash": "7f9c"}, "status"))
	_, err = dc.Resource(core.RolloutGVR).Namespace(ns).UpdateStatus(ctx, ro, metav1.UpdateOptions{})
	require.NoError(t, err)

	var r result
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the command did not finish")
	}
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, "job=attach-hook", "JOB_NAME is logged")
	for _, name := range []string{"app-a", "app-b"} {
		cm, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		var uids []string
		for _, o := range cm.OwnerReferences {
			uids = append(uids, string(o.UID))
		}
		assert.Contains(t, uids, string(rs.UID), "%s is owned by the current ReplicaSet", name)
		if name == "app-a" {
			assert.Contains(t, uids, string(old.UID), "the existing owner survives")
		}
	}
	controlplane.Eventually(t, 20*time.Second, "an Attached Event on each changed ConfigMap", func() error {
		evs, err := kc.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Attached"})
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind == "ConfigMap" {
				seen[ev.InvolvedObject.Name] = true
			}
		}
		if !seen["app-a"] || !seen["app-b"] {
			return fmt.Errorf("events for %v", seen)
		}
		return nil
	})
}

func TestExitCodes(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ctx := context.Background()
	ns := newNamespace(t, cp)
	kc := cp.Client()
	zero := int32(0)
	labels := map[string]string{"app": "x"}
	rs, err := kc.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "x-1"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x-config"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	kcfg := cp.Kubeconfig()

	cases := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"legacy without namespace", []string{"-rollout", "r", "-configmaps", "a"}, 2, "-namespace is required"},
		{"legacy unknown flag", []string{"-rollout", "r", "-namespace", ns, "-bogus"}, 2, "bogus"},
		{"attach without a workload", []string{"attach", "--kubeconfig", kcfg, "-n", ns}, 2, "exactly one of"},
		{"attach with a bad name", []string{"attach", "--kubeconfig", kcfg, "-n", ns, "--replicaset", "x-1", "--configmaps", "other/x"}, 2, "cross-namespace"},
		{"attach a missing ReplicaSet fails at once", []string{"attach", "--kubeconfig", kcfg, "-n", ns, "--replicaset", "nope"}, 1, "ReplicaSet " + ns + "/nope not found"},
		{"legacy with a missing ConfigMap", []string{"-rollout", "r", "-namespace", ns, "-configmaps", "nope", "-kubeconfig", kcfg, "-timeout", "2s"}, 1, ""},
		{"unknown command", []string{"frobnicate"}, 2, "unknown command"},
		{"attach json", []string{"attach", "--kubeconfig", kcfg, "-n", ns, "--replicaset", "x-1", "--configmaps", "x-config", "-o", "json"}, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := run(ctx, tc.args...)
			assert.Equal(t, tc.wantCode, code, "stdout: %s\nstderr: %s", out, errOut)
			assert.Contains(t, errOut, tc.wantErr)
			if code != 0 {
				lines := strings.Split(strings.TrimSpace(errOut), "\n")
				assert.True(t, strings.HasPrefix(lines[len(lines)-1], "error: "), "the last line is a one-line reason: %q", errOut)
			}
			if tc.name == "attach json" {
				var res cli.AttachOutput
				require.NoError(t, json.Unmarshal([]byte(out), &res))
				assert.Equal(t, rs.UID, res.UID)
				require.Len(t, res.Objects, 1)
				assert.Equal(t, core.OutcomeAttached, res.Objects[0].Outcome)
			}
		})
	}
}
