package argocd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/harnessproc"
)

// Toolchain is the Go toolchain of hack/tools/argocd (argo-cd v3.6 declares go 1.27);
// it is used for that module's commands only. ARGOCD_GOTOOLCHAIN overrides it.
const Toolchain = "go1.27.3"

// Resources of Argo CD's CRDs.
var (
	ApplicationGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "applications"}
	AppProjectGVR  = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "appprojects"}
)

// partOf is the label Argo CD reads its settings (argocd-cm, argocd-secret) by.
var partOf = map[string]string{"app.kubernetes.io/part-of": "argocd"}

// moduleDir is the module-cache folder of the argo-cd module hack/tools/argocd pins
// (downloaded and checksum-verified against its go.sum if needed).
func moduleDir(ctx context.Context, root string) (string, error) {
	tc := os.Getenv("ARGOCD_GOTOOLCHAIN")
	if tc == "" {
		tc = Toolchain
	}
	return controlplane.ModuleDirAt(ctx, filepath.Join(root, "hack", "tools", "argocd"), "github.com/argoproj/argo-cd/v3", "GOTOOLCHAIN="+tc)
}

// install creates what argocd-server (or the install manifests) would: the CRDs, the
// namespace, argocd-cm, argocd-secret and the default AppProject.
func (a *ArgoCD) install(ctx context.Context, mod string) error {
	if err := a.installCRDs(ctx, mod); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}
	if _, err := a.kc.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", Namespace, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "argocd-cm", Namespace: Namespace, Labels: partOf},
		Data: map[string]string{"timeout.reconciliation": a.opts.Reconciliation.String()}}
	if _, err := a.kc.CoreV1().ConfigMaps(Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("argocd-cm: %w", err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "argocd-secret", Namespace: Namespace, Labels: partOf},
		StringData: map[string]string{"server.secretkey": randomKey()}}
	if _, err := a.kc.CoreV1().Secrets(Namespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("argocd-secret: %w", err)
	}
	proj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
		"metadata": map[string]any{"name": "default", "namespace": Namespace},
		"spec": map[string]any{
			"sourceRepos":              []any{"*"},
			"destinations":             []any{map[string]any{"server": "*", "namespace": "*"}},
			"clusterResourceWhitelist": []any{map[string]any{"group": "*", "kind": "*"}},
		},
	}}
	if _, err := a.dc.Resource(AppProjectGVR).Namespace(Namespace).Create(ctx, proj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("AppProject default: %w", err)
	}
	return nil
}

// installCRDs creates the CRDs of the module's manifests/crds and waits until the
// apiserver serves them.
func (a *ArgoCD) installCRDs(ctx context.Context, mod string) error {
	crds, err := controlplane.CRDsIn(filepath.Join(mod, "manifests", "crds"), "*-crd.yaml")
	if err != nil || len(crds) == 0 {
		return fmt.Errorf("no CRDs in %s/manifests/crds (%v)", mod, err)
	}
	if err := controlplane.CreateCRDs(ctx, a.dc, crds); err != nil {
		return err
	}
	return controlplane.WaitServed(ctx, a.dc, Namespace, func(check func() error) error { return poll(ctx, check) },
		ApplicationGVR, AppProjectGVR)
}

// poll calls check every 100 ms until it returns nil, a harnessproc.StopPolling, or ctx
// ends.
func poll(ctx context.Context, check func() error) error {
	return harnessproc.Poll(ctx, 100*time.Millisecond, check)
}
