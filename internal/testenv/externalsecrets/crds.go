package externalsecrets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// CRDDir is the folder of the module holding the CRD manifests.
const CRDDir = "config/crds/bases"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRDs reads every CustomResourceDefinition of the module at mod (its CRDDir).
func CRDs(mod string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(mod, CRDDir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		objs, err := readYAML(f)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				out = append(out, o)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", filepath.Join(mod, CRDDir))
	}
	return out, nil
}

func readYAML(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 64*1024)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
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
	for _, crd := range crds {
		if _, err := dc.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.GetName(), err)
		}
	}
	for _, crd := range crds {
		name := crd.GetName()
		if err := poll(ctx, func() error { return established(ctx, dc, name) }); err != nil {
			return err
		}
	}
	return poll(ctx, func() error {
		_, err := dc.Resource(ExternalSecretGVR).Namespace("default").List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
}

func established(ctx context.Context, dc dynamic.Interface, name string) error {
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
	return fmt.Errorf("CRD %s not established yet", name)
}
