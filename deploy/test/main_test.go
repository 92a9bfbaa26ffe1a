package deploytest

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// cp is this package's local control plane (nil with -short).
var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.TestMain(m, &cp)) }

// extraCRDs are the CRDs the deploy manifests need beyond the Argo Rollouts and Argo Events
// ones every control plane installs: read from the modules hack/tools/crds/go.mod pins.
var extraCRDs = []struct {
	module string
	glob   string
}{
	{"github.com/argoproj/argo-cd/v3", "manifests/crds/*-crd.yaml"},
	{"github.com/cert-manager/cert-manager", "deploy/crds/crd-certificates.yaml"},
	{"github.com/prometheus-operator/prometheus-operator", "example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"},
	{"github.com/prometheus-operator/prometheus-operator", "example/prometheus-operator-crd/monitoring.coreos.com_prometheusrules.yaml"},
}

// installExtraCRDs creates the extraCRDs and waits until they are established.
func installExtraCRDs(t *testing.T, ctx context.Context, dc dynamic.Interface) {
	t.Helper()
	var crds []*unstructured.Unstructured
	for _, src := range extraCRDs {
		dir, err := controlplane.ModuleDir(ctx, src.module)
		if err != nil {
			t.Fatal(err)
		}
		found, err := controlplane.CRDsIn(dir, src.glob)
		if err != nil || len(found) == 0 {
			t.Fatalf("no CRD manifests %s in %s (%v)", src.glob, src.module, err)
		}
		for _, o := range found {
			// cert-manager's manifests carry Helm template text in labels and annotations.
			o.SetLabels(nil)
			o.SetAnnotations(nil)
		}
		crds = append(crds, found...)
	}
	err := controlplane.InstallCRDs(ctx, dc, crds, func(check func() error) error {
		controlplane.Eventually(t, 60*time.Second, "extra CRDs established", check)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func ensureNamespace(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	_, err := cp.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

func isForbidden(s string) bool { return strings.Contains(s, "forbidden") }
