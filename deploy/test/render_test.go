package deploytest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Release names the chart is rendered with: the names the shipped Sensors point at
// (configmap-attacher.configmap-attacher.svc).
const (
	releaseName      = "configmap-attacher"
	releaseNamespace = "configmap-attacher"
)

// repoRoot is the main module's root (this module lives in deploy/test).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func chartDir(t testing.TB) string {
	return filepath.Join(repoRoot(t), "deploy", "helm", "configmap-attacher")
}

// renderMode is how Helm is run: Template is `helm template` (client only, default
// capabilities, lookup answers nothing); Install is an install against a cluster
// (its capabilities, lookup live).
type renderMode struct {
	name string
	caps *chartutil.Capabilities
	cfg  *rest.Config // nil: no cluster
}

var templateMode = renderMode{name: "template", caps: chartutil.DefaultCapabilities}

// renderChart renders the chart as Helm does and returns the manifests by template file.
func renderChart(t testing.TB, mode renderMode, values string) map[string]string {
	t.Helper()
	out, err := renderChartErr(mode, chartDir(t), releaseNamespace, values)
	if err != nil {
		t.Fatalf("helm %s: %v", mode.name, err)
	}
	return out
}

// renderChartNS renders the chart into namespace ns.
func renderChartNS(t testing.TB, ns, values string) map[string]string {
	t.Helper()
	out, err := renderChartErr(templateMode, chartDir(t), ns, values)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	return out
}

func renderChartErr(mode renderMode, dir, ns, values string) (map[string]string, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("loading chart: %w", err)
	}
	vals, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		return nil, fmt.Errorf("reading values: %w", err)
	}
	if err := chartutil.ProcessDependenciesWithMerge(ch, vals); err != nil {
		return nil, fmt.Errorf("processing dependencies: %w", err)
	}
	rv, err := chartutil.ToRenderValues(ch, vals, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: ns, Revision: 1, IsInstall: true}, mode.caps)
	if err != nil {
		return nil, fmt.Errorf("render values: %w", err)
	}
	var e engine.Engine
	if mode.cfg != nil {
		e = engine.New(mode.cfg)
	}
	out, err := e.Render(ch, rv)
	if err != nil {
		return nil, fmt.Errorf("rendering: %w", err)
	}
	for k := range out {
		if strings.HasSuffix(k, "NOTES.txt") {
			delete(out, k)
		}
	}
	return out, nil
}

// joinManifests concatenates rendered files in file-name order.
func joinManifests(files map[string]string) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		if strings.TrimSpace(files[n]) == "" {
			continue
		}
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", n, strings.TrimSpace(files[n]))
	}
	return b.String()
}

// decodeObjects splits a multi-document YAML stream into objects (empty documents skipped).
func decodeObjects(data string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(data)), 64*1024)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

func objectsFromFile(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeObjects(string(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return objs
}

// kustomizeBuild runs the pinned Kustomize library on dir (kustomize build DIR).
func kustomizeBuild(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	y, err := rm.AsYaml()
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	objs, err := decodeObjects(string(y))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return objs
}

func toYAML(t testing.TB, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
