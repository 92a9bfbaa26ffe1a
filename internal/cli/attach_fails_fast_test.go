package cli_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// createRolloutWithoutStatus creates Rollout name, on a template mounting configMap,
// that no controller observes (the package's control plane runs no Rollouts
// controller): attach waits for it.
func createRolloutWithoutStatus(t *testing.T, cp *controlplane.ControlPlane, ns, name, configMap string) *unstructured.Unstructured {
	t.Helper()
	tmpl, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ptr(mountTemplate(configMap)))
	require.NoError(t, err)
	ro, err := dynamic.NewForConfigOrDie(cp.RESTConfig()).Resource(core.RolloutGVR).Namespace(ns).Create(context.Background(),
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "app"}}, "template": tmpl}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	return ro
}

// rolloutAtRest creates Rollout name on a template mounting configMap, its ReplicaSet
// and the status its controller writes once it has observed the spec: the state of a
// Rollout that nothing is changing. This package's control plane runs no Rollouts
// controller, so the test writes what that controller writes (the canary proofs run it:
// internal/e2e/acceptance).
func rolloutAtRest(t *testing.T, cp *controlplane.ControlPlane, ns, name, configMap string) *appsv1.ReplicaSet {
	t.Helper()
	ctx := context.Background()
	dc := dynamic.NewForConfigOrDie(cp.RESTConfig())
	ro := createRolloutWithoutStatus(t, cp, ns, name, configMap)
	tmpl := mountTemplate(configMap)
	tmpl.Labels[core.RolloutHashLabel] = "5b6d"
	rs, err := cp.Client().AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-5b6d", Labels: tmpl.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: core.RolloutKind, Name: name, UID: ro.GetUID(), Controller: ptr(true)}}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedField(ro.Object, map[string]any{
		"observedGeneration": fmt.Sprint(ro.GetGeneration()), "currentPodHash": "5b6d"}, "status"))
	_, err = dc.Resource(core.RolloutGVR).Namespace(ns).UpdateStatus(ctx, ro, metav1.UpdateOptions{})
	require.NoError(t, err)
	return rs
}

// unreachableKubeconfig writes a copy of cp's kubeconfig whose server is a loopback port
// nothing listens on.
func unreachableKubeconfig(t *testing.T, cp *controlplane.ControlPlane) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(cp.Kubeconfig())
	require.NoError(t, err)
	port, err := controlplane.FreePort()
	require.NoError(t, err)
	for _, c := range cfg.Clusters {
		c.Server = fmt.Sprintf("https://127.0.0.1:%d", port)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// Issue 29: where waiting cannot help, attach and the old Job's form fail at once, exit
// 1 with the reason on one line (runTable cuts a command off after 90 s, far below the
// 5-minute --timeout each runs with): an apiserver that does not answer, a workload or
// a named ReplicaSet that does not exist (with the closest name), with --dry-run=server too.
func TestAttachFailsAtOnceWhereWaitingCannotHelp(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	kc := cp.Client()
	ns := newNamespace(t, cp)
	createRolloutWithoutStatus(t, cp, ns, "web", "web-config")
	testfix.CreateReplicaSet(t, kc, ns, "web-1", "web-config")
	kcfg, bad := cp.Kubeconfig(), unreachableKubeconfig(t, cp)
	legacyEnv := map[string]string{"KUBECONFIG": kcfg, "IS_IN_CLUSTER": "false"}
	legacyBad := map[string]string{"KUBECONFIG": bad, "IS_IN_CLUSTER": "false"}
	unreachable := []string{"cannot reach the apiserver https://127.0.0.1:", "connection refused"}
	runTable(t, []dayOneCase{
		{name: "attach, the apiserver unreachable", args: []string{"attach", "--kubeconfig", bad, "-n", ns, "--rollout", "web"},
			wantCode: 1, wantErr: unreachable, errLines: 1, emptyOut: true},
		{name: "attach --dry-run=server, the apiserver unreachable",
			args:     []string{"attach", "--kubeconfig", bad, "-n", ns, "--rollout", "web", "--configmaps", "web-config", "--dry-run=server"},
			wantCode: 1, wantErr: unreachable, errLines: 1, emptyOut: true},
		{name: "the old form, the apiserver unreachable", env: legacyBad,
			args:     []string{"-rollout", "web", "-namespace", ns, "-configmaps", "web-config"},
			wantCode: 1, wantErr: unreachable, errLines: 1, emptyOut: true},
		{name: "attach, a Rollout that does not exist", args: []string{"attach", "--kubeconfig", kcfg, "-n", ns, "--rollout", "wev"},
			wantCode: 1, wantErr: []string{"error: Rollout " + ns + `/wev not found; did you mean Rollout "web"?`}, errLines: 1, emptyOut: true},
		{name: "attach --dry-run=server, a Rollout that does not exist",
			args:     []string{"attach", "--kubeconfig", kcfg, "-n", ns, "--rollout", "wev", "--configmaps", "web-config", "--dry-run=server"},
			wantCode: 1, wantErr: []string{"error: Rollout " + ns + `/wev not found; did you mean Rollout "web"?`}, errLines: 1},
		{name: "the old form, a Rollout that does not exist", env: legacyEnv,
			args:     []string{"-rollout", "wev", "-namespace", ns, "-configmaps", "web-config"},
			wantCode: 1, wantErr: []string{"error: Rollout " + ns + `/wev not found; did you mean Rollout "web"?`}, errLines: 1},
		{name: "attach, a Deployment that does not exist", args: []string{"attach", "--kubeconfig", kcfg, "-n", ns, "--deployment", "web"},
			wantCode: 1, wantErr: []string{"error: Deployment " + ns + "/web not found"}, errLines: 1},
		{name: "attach, a ReplicaSet that does not exist", args: []string{"attach", "--kubeconfig", kcfg, "-n", ns, "--replicaset", "web-2"},
			wantCode: 1, wantErr: []string{"error: ReplicaSet " + ns + `/web-2 not found; did you mean ReplicaSet "web-1"?`}, errLines: 1},
	})
}

// Rule 10 where waiting cannot help: a listed ConfigMap newer than the current
// ReplicaSet, which neither that ReplicaSet nor the workload's spec uses, once the
// controller has caught up and the ConfigMap is older than the settle time: the command
// fails at once, names the fixes, and writes nothing; never the older ReplicaSet. The
// Deployment is the real deployment controller's.
func TestAttachFailsAtOnceOnAListedConfigMapNoSpecWillUse(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	defer cli.SetListedSettle(time.Millisecond)() // the ConfigMap is "long" created when the command runs
	ctx := context.Background()
	kc := cp.Client()
	ns := newNamespace(t, cp)
	_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config-1"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tmpl := mountTemplate("app-config-1")
	_, err = kc.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	var cur *appsv1.ReplicaSet
	controlplane.Eventually(t, 30*time.Second, "the Deployment's ReplicaSet", func() error {
		cur, err = core.CurrentReplicaSet(ctx, kc, nil, "Deployment", ns, "app")
		return err
	})
	roRS := rolloutAtRest(t, cp, ns, "web", "web-config-1")
	createConfigMapAfter(t, kc, ns, "app-config-2", cur.CreationTimestamp)
	createConfigMapAfter(t, kc, ns, "web-config-2", roRS.CreationTimestamp)
	why := func(cm, rs string) []string {
		return []string{"waiting cannot help", cm + " (created ", "is newer than the current ReplicaSet " + rs,
			"configmap-attacher attach --replicaset " + rs + " -n " + ns + " --configmaps " + cm}
	}
	runTable(t, []dayOneCase{
		{name: "attach --deployment", args: []string{"attach", "--kubeconfig", cp.Kubeconfig(), "-n", ns, "--deployment", "app", "--configmaps", "app-config-2"},
			wantCode: 1, wantErr: why("app-config-2", cur.Name), errLines: 1, emptyOut: true},
		{name: "attach --deployment --dry-run=server",
			args:     []string{"attach", "--kubeconfig", cp.Kubeconfig(), "-n", ns, "--deployment", "app", "--configmaps", "app-config-2", "--dry-run=server"},
			wantCode: 1, wantErr: why("app-config-2", cur.Name), errLines: 1, emptyOut: true},
		{name: "the old form", env: map[string]string{"KUBECONFIG": cp.Kubeconfig(), "IS_IN_CLUSTER": "false"},
			args:     []string{"-rollout", "web", "-namespace", ns, "-configmaps", "web-config-2"},
			wantCode: 1, wantErr: append(why("web-config-2", roRS.Name), "the Rollout's spec"), errLines: 1, emptyOut: true},
	})
	assert.Empty(t, ownerUIDsOf(t, kc, ns, "app-config-2"), "nothing written")
	assert.Empty(t, ownerUIDsOf(t, kc, ns, "web-config-2"), "nothing written")
}
