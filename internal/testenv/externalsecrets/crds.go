package externalsecrets

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// CRDDir is the folder of the module holding the CRD manifests.
const CRDDir = "config/crds/bases"

// CRDs reads every CustomResourceDefinition of the module at mod (its CRDDir).
func CRDs(mod string) ([]*unstructured.Unstructured, error) {
	out, err := controlplane.CRDsIn(filepath.Join(mod, CRDDir), "*.yaml")
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", filepath.Join(mod, CRDDir))
	}
	return out, nil
}

// installCRDs creates the module's CRDs and waits until each is established and the
// ExternalSecret resource answers a list.
func installCRDs(ctx context.Context, cfg *rest.Config, mod string) error {
	crds, err := CRDs(mod)
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	wait := func(check func() error) error { return poll(ctx, check) }
	if err := controlplane.InstallCRDs(ctx, dc, crds, wait); err != nil {
		return err
	}
	return controlplane.WaitServed(ctx, dc, "default", wait, ExternalSecretGVR)
}
