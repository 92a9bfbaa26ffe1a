package deploytest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installExtraCRDs creates the extraCRDs and waits until they are served.
func installExtraCRDs(t *testing.T, ctx context.Context, dc dynamic.Interface) {
	t.Helper()
	var names []string
	for _, src := range extraCRDs {
		dir, err := controlplane.ModuleDir(ctx, src.module)
		if err != nil {
			t.Fatal(err)
		}
		files, err := filepath.Glob(filepath.Join(dir, src.glob))
		if err != nil || len(files) == 0 {
			t.Fatalf("no CRD manifests %s in %s (%v)", src.glob, src.module, err)
		}
		for _, f := range files {
			for _, o := range objectsFromFile(t, f) {
				if o.GetKind() != "CustomResourceDefinition" {
					continue
				}
				// cert-manager's manifests carry Helm template text in labels and annotations.
				o.SetLabels(nil)
				o.SetAnnotations(nil)
				if _, err := dc.Resource(crdGVR).Create(ctx, o, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatalf("creating CRD %s from %s: %v", o.GetName(), src.module, err)
				}
				names = append(names, o.GetName())
			}
		}
	}
	for _, name := range names {
		controlplane.Eventually(t, 60*time.Second, "CRD "+name+" established", func() error {
			got, err := dc.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, c := range conds {
				if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
			return fmt.Errorf("not established")
		})
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
