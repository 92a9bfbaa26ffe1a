package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

func mountTemplate(configMap string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "app"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}},
			Volumes: []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}}}}}
}

func ownerUIDsOf(t *testing.T, kc kubernetes.Interface, ns, name string) []types.UID {
	t.Helper()
	cm, err := kc.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	var out []types.UID
	for _, o := range cm.OwnerReferences {
		out = append(out, o.UID)
	}
	return out
}

// createConfigMapAfter creates an unlabelled ConfigMap in a later second than t0, so
// that its creationTimestamp (second resolution) is newer.
func createConfigMapAfter(t *testing.T, kc kubernetes.Interface, ns, name string, t0 metav1.Time) {
	t.Helper()
	time.Sleep(time.Until(t0.Add(1100 * time.Millisecond)))
	_, err := kc.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// Rule 10 (issue 16), with the real Deployment controller: the command starts before the
// new spec is applied (an Argo CD Sync hook racing the apply). It waits, says on stderr
// what it waits for, and attaches the new ConfigMap to the new ReplicaSet, never to
// the old one that was current when it started.
func TestAttachWaitsForTheReplicaSetThatUsesTheListedNames(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	defer cli.SetProgressEvery(500 * time.Millisecond)()
	ctx := context.Background()
	kc := cp.Client()
	ns := newNamespace(t, cp)
	_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config-1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tmpl := mountTemplate("app-config-1")
	d, err := kc.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	var old *appsv1.ReplicaSet
	controlplane.Eventually(t, 30*time.Second, "the first ReplicaSet", func() error {
		old, err = core.CurrentReplicaSet(ctx, kc, nil, "Deployment", ns, d.Name)
		return err
	})
	createConfigMapAfter(t, kc, ns, "app-config-2", old.CreationTimestamp) // applied first by the sync

	type result struct {
		code           int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, out, errOut := run(ctx, "attach", "--kubeconfig", cp.Kubeconfig(), "-n", ns, "--deployment", "app",
			"--configmaps", "app-config-2", "--timeout", "60s")
		done <- result{code, out, errOut}
	}()
	time.Sleep(2 * time.Second) // the command is waiting; now the new spec is applied
	select {
	case r := <-done:
		t.Fatalf("the command did not wait for the new spec: %+v", r)
	default:
	}
	d, err = kc.AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
	require.NoError(t, err)
	d.Spec.Template = mountTemplate("app-config-2")
	_, err = kc.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
	require.NoError(t, err)

	var r result
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("the command did not finish")
	}
	require.Equal(t, 0, r.code, "stdout: %s\nstderr: %s", r.stdout, r.stderr)
	assert.Contains(t, r.stderr, "waiting for Deployment "+ns+"/app (", "progress on stderr")
	assert.Contains(t, r.stderr, "app-config-2", "the progress names what is missing")
	cur, err := core.CurrentReplicaSet(ctx, kc, nil, "Deployment", ns, "app")
	require.NoError(t, err)
	require.NotEqual(t, old.UID, cur.UID)
	owners := ownerUIDsOf(t, kc, ns, "app-config-2")
	assert.Contains(t, owners, cur.UID, "the new ReplicaSet owns the new config")
	assert.NotContains(t, owners, old.UID, "never the old ReplicaSet")
	assert.Empty(t, ownerUIDsOf(t, kc, ns, "app-config-1"), "nothing listed it")
}

// Rule 10's fallback: a listed name that no template uses and that is older than the
// current ReplicaSet (read by the application at run time) goes to the current
// ReplicaSet at once, and the command says so.
func TestAttachListedNameNoTemplateUses(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ctx := context.Background()
	kc := cp.Client()
	ns := newNamespace(t, cp)
	_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "runtime-settings"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	time.Sleep(1100 * time.Millisecond) // the ReplicaSet is created in a later second
	tmpl := mountTemplate("app-config-1")
	_, err = kc.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	start := time.Now()
	code, out, errOut := run(ctx, "attach", "--kubeconfig", cp.Kubeconfig(), "-n", ns, "--deployment", "app",
		"--configmaps", "runtime-settings", "--timeout", "30s")
	require.Equal(t, 0, code, "stdout: %s\nstderr: %s", out, errOut)
	assert.Less(t, time.Since(start), 15*time.Second, "no wait for the timeout")
	assert.Contains(t, out, "as the old Job did", "the fallback is said, with the result")
	assert.Empty(t, errOut, "quiet on stderr on success")
	cur, err := core.CurrentReplicaSet(ctx, kc, nil, "Deployment", ns, "app")
	require.NoError(t, err)
	assert.Equal(t, []types.UID{cur.UID}, ownerUIDsOf(t, kc, ns, "runtime-settings"))
	assert.True(t, strings.Contains(out, "attached"), "%s", out)
}

func ptr[T any](v T) *T { return &v }
