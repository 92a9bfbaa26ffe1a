package deploytest

import (
	"path/filepath"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// chartPath is the chart's path in the repository, as Argo CD Applications name it.
const chartPath = "deploy/helm/configmap-attacher"

// argoCDRender is the chart as one shipped Argo CD Application renders it.
type argoCDRender struct {
	file      string // the Application's file, relative to the repository root
	app       string
	namespace string // destination.namespace: the release namespace
	release   string // helm.releaseName
	values    string // helm.valuesObject as YAML
}

// argoCDChartRenders finds every source of a shipped Application that is this chart.
func argoCDChartRenders(t *testing.T) []argoCDRender {
	t.Helper()
	var files []string
	for _, glob := range []string{"deploy/argocd/*.yaml", "deploy/argocd/apps/*.yaml"} {
		m, err := filepath.Glob(filepath.Join(repoRoot(t), glob))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	var out []argoCDRender
	for _, f := range files {
		for _, o := range objectsFromFile(t, f) {
			if o.GetKind() != "Application" {
				continue
			}
			var sources []any
			if s, ok, _ := unstructured.NestedMap(o.Object, "spec", "source"); ok {
				sources = append(sources, s)
			}
			if ss, ok, _ := unstructured.NestedSlice(o.Object, "spec", "sources"); ok {
				sources = append(sources, ss...)
			}
			ns, _, _ := unstructured.NestedString(o.Object, "spec", "destination", "namespace")
			for _, s := range sources {
				src := s.(map[string]any)
				if src["path"] != chartPath {
					continue
				}
				rel, _ := filepath.Rel(repoRoot(t), f)
				r := argoCDRender{file: rel, app: o.GetName(), namespace: ns}
				r.release, _, _ = unstructured.NestedString(src, "helm", "releaseName")
				if v, ok, _ := unstructured.NestedMap(src, "helm", "valuesObject"); ok {
					r.values = toYAML(t, v)
				}
				if v, ok, _ := unstructured.NestedString(src, "helm", "values"); ok {
					r.values += "\n" + v
				}
				out = append(out, r)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no shipped Argo CD Application deploys the chart")
	}
	return out
}

// render renders the chart as Argo CD does for the Application (helm template).
func (r argoCDRender) render(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	files, err := renderChartErr(templateMode, chartDir(t), r.namespace, r.values)
	if err != nil {
		t.Fatalf("Argo CD cannot render %s (%s): %v", r.app, r.file, err)
	}
	objs, err := decodeObjects(joinManifests(files))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestArgoCDApplicationsRenderTheChart: every shipped Application that deploys the chart
// renders it (the required token Secret is named), identically every time (so Argo CD
// never shows a diff of its own making), with the release and namespace the shipped
// Sensors point at, the NetworkPolicy and the bearer token on, and no Secret: the token
// never comes from Git.
func TestArgoCDApplicationsRenderTheChart(t *testing.T) {
	for _, r := range argoCDChartRenders(t) {
		t.Run(r.file, func(t *testing.T) {
			if r.release != releaseName || r.namespace != releaseNamespace {
				t.Errorf("release %q in %q; the shipped Sensors point at %s.%s.svc", r.release, r.namespace, releaseName, releaseNamespace)
			}
			a, b := r.render(t), r.render(t)
			if toYAML(t, objectsOf(a)) != toYAML(t, objectsOf(b)) {
				t.Fatal("two renders differ")
			}
			if len(ofKind(a, "NetworkPolicy")) != 1 {
				t.Error("no NetworkPolicy")
			}
			if s := ofKind(a, "Secret"); len(s) != 0 {
				t.Errorf("renders Secret %s: a token in the Application's values is a token in Git", s[0].GetName())
			}
			if tokenVolume(t, a) == nil {
				t.Error("the HTTP receiver runs without a bearer token")
			}
		})
	}
}

func objectsOf(objs []*unstructured.Unstructured) []map[string]any {
	out := make([]map[string]any, len(objs))
	for i, o := range objs {
		out[i] = o.Object
	}
	return out
}
