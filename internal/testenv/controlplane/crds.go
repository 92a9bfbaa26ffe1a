package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRDSource is a pinned module and the folder inside it holding CRD manifests.
type CRDSource struct {
	Module string
	Dir    string
}

const rolloutsModule = "github.com/argoproj/argo-rollouts"

// CRDSources are the CRDs installed by Start, read from the module versions that
// hack/tools/crds/go.mod pins.
var CRDSources = []CRDSource{
	{Module: rolloutsModule, Dir: "manifests/crds"},
	{Module: "github.com/argoproj/argo-events", Dir: "manifests/base/crds"},
}

// ModuleDir returns the module-cache folder of a module pinned by hack/tools/crds/go.mod,
// downloading (and checksum-verifying against its go.sum) it if needed.
func ModuleDir(ctx context.Context, module string) (string, error) {
	return moduleDirIn(ctx, filepath.Join("hack", "tools", "crds"), module)
}

// moduleDirIn is ModuleDir for the go.mod in toolsDir (relative to the repository root),
// with env (such as GOTOOLCHAIN) added to the go command's.
func moduleDirIn(ctx context.Context, toolsDir, module string, env ...string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return ModuleDirAt(ctx, filepath.Join(root, toolsDir), module, env...)
}

// ModuleDirAt returns the module-cache folder of module as the tools module in dir (a
// go.mod of pins, such as hack/tools/eso) pins it, downloading (and checksum-verifying
// against that go.sum) it if needed; env (such as GOTOOLCHAIN) is added to the go
// command's environment.
func ModuleDirAt(ctx context.Context, dir, module string, env ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOFLAGS=-mod=mod"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w: %s%s", module, err, stderr.String(), out)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %s", module, info.Error)
	}
	return info.Dir, nil
}

// CRDs reads every CustomResourceDefinition in the pinned modules' manifests, the Argo
// Rollouts ones of the version $CONFIGMAP_ATTACHER_ROLLOUTS selects.
func CRDs(ctx context.Context) ([]*unstructured.Unstructured, error) {
	r, err := ResolveRollouts("")
	if err != nil {
		return nil, err
	}
	return CRDsFor(ctx, r)
}

// CRDsFor is CRDs with the Argo Rollouts CRDs read from release r's tools module.
func CRDsFor(ctx context.Context, r RolloutsRelease) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, src := range CRDSources {
		dir, err := ModuleDir(ctx, src.Module)
		if src.Module == rolloutsModule {
			dir, err = moduleDirIn(ctx, r.ToolsDir, src.Module, r.toolchainEnv()...)
		}
		if err != nil {
			return nil, err
		}
		crds, err := CRDsIn(filepath.Join(dir, src.Dir), "*.yaml")
		if err != nil {
			return nil, err
		}
		out = append(out, crds...)
	}
	if len(out) == 0 {
		return nil, errors.New("no CRDs found in the pinned modules")
	}
	return out, nil
}

// CRDsIn reads the CustomResourceDefinitions of the files in dir matching pattern (every
// YAML document of each file; none found is no error).
func CRDsIn(dir, pattern string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		objs, err := readYAMLObjects(f)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				out = append(out, o)
			}
		}
	}
	return out, nil
}

func readYAMLObjects(path string) ([]*unstructured.Unstructured, error) {
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
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// CreateCRDs creates crds (one already there is left as it is).
func CreateCRDs(ctx context.Context, dc dynamic.Interface, crds []*unstructured.Unstructured) error {
	for _, crd := range crds {
		_, err := dc.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.GetName(), err)
		}
	}
	return nil
}

// InstallCRDs creates crds (CreateCRDs) and waits until each is established, wait
// polling the check until it returns nil.
func InstallCRDs(ctx context.Context, dc dynamic.Interface, crds []*unstructured.Unstructured, wait func(check func() error) error) error {
	if err := CreateCRDs(ctx, dc, crds); err != nil {
		return err
	}
	for _, crd := range crds {
		name := crd.GetName()
		if err := wait(func() error { return established(ctx, dc, name) }); err != nil {
			return err
		}
	}
	return nil
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

func (cp *ControlPlane) installCRDs(ctx context.Context) error {
	crds, err := CRDsFor(ctx, cp.rollouts)
	if err != nil {
		return err
	}
	dc, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		return err
	}
	wait := func(check func() error) error { return cp.poll(ctx, "kube-apiserver", check) }
	if err := InstallCRDs(ctx, dc, crds, wait); err != nil {
		return err
	}
	// Discovery must list the new resources before clients (and the garbage
	// collector) can use them.
	return WaitServed(ctx, dc, "default", wait, schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"})
}

// WaitServed waits (wait polling the check until it returns nil) until the apiserver
// lists each of gvrs in namespace ns: once discovery has the kinds of new CRDs.
func WaitServed(ctx context.Context, dc dynamic.Interface, ns string, wait func(check func() error) error, gvrs ...schema.GroupVersionResource) error {
	for _, gvr := range gvrs {
		if err := wait(func() error {
			_, err := dc.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{Limit: 1})
			return err
		}); err != nil {
			return fmt.Errorf("waiting for %s: %w", gvr.Resource, err)
		}
	}
	return nil
}

// NewClients are the typed and the dynamic client of cfg.
func NewClients(cfg *rest.Config) (kubernetes.Interface, dynamic.Interface, error) {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	dc, err := dynamic.NewForConfig(cfg)
	return kc, dc, err
}

func (cp *ControlPlane) waitDefaultServiceAccount(ctx context.Context) error {
	kc := cp.Client()
	return cp.poll(ctx, "kube-controller-manager", func() error {
		_, err := kc.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("default ServiceAccount: %w", err)
		}
		return nil
	})
}
