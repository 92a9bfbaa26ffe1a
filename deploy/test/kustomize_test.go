package deploytest

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

var update = flag.Bool("update", false, "rewrite deploy/kustomize/base from the chart's default rendering")

// helmOnlyLabels are the labels only Helm sets; the Kustomize base is the chart without them.
var helmOnlyLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by"}

const baseHeader = "# Generated from the Helm chart's default rendering (deploy/helm/configmap-attacher);\n" +
	"# do not edit: change the chart, then run `cd deploy/test && go test -run TestKustomizeBase -update .`\n"

// baseFiles renders the chart with default values (plus requiredValues: the token
// Secret's name) as the Kustomize base's files.
func baseFiles(t *testing.T) map[string]string {
	files := renderChart(t, templateMode, requiredValues)
	out := map[string]string{}
	for name, body := range files {
		if strings.TrimSpace(body) == "" {
			continue
		}
		var keep []string
		for _, line := range strings.Split(body, "\n") {
			if strings.Contains(line, "helm.sh/chart:") || strings.Contains(line, "app.kubernetes.io/managed-by:") {
				continue
			}
			keep = append(keep, line)
		}
		out[filepath.Base(name)] = baseHeader + strings.TrimLeft(strings.Join(keep, "\n"), "\n")
	}
	return out
}

func kustomizeDir(t testing.TB, parts ...string) string {
	return filepath.Join(append([]string{repoRoot(t), "deploy", "kustomize"}, parts...)...)
}

// TestKustomizeBaseIsTheChart: `kustomize build deploy/kustomize/base` is the chart's
// default rendering (less Helm's own labels), so the two never drift.
func TestKustomizeBaseIsTheChart(t *testing.T) {
	files := baseFiles(t)
	if *update {
		names := make([]string, 0, len(files))
		for name, body := range files {
			if err := os.WriteFile(kustomizeDir(t, "base", name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			names = append(names, name)
		}
		sort.Strings(names)
		t.Logf("wrote %v", names)
	}
	want := map[string]*unstructured.Unstructured{}
	for _, body := range files {
		objs, err := decodeObjects(body)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			want[objectKey(o)] = o
		}
	}
	got := map[string]*unstructured.Unstructured{}
	for _, o := range kustomizeBuild(t, kustomizeDir(t, "base")) {
		got[objectKey(o)] = o
	}
	if !reflect.DeepEqual(sortedKeys(got), sortedKeys(want)) {
		t.Fatalf("kustomize base objects %v, chart renders %v (regenerate: go test -run TestKustomizeBase -update .)", sortedKeys(got), sortedKeys(want))
	}
	for k, w := range want {
		if !reflect.DeepEqual(got[k].Object, w.Object) {
			t.Errorf("%s differs from the chart (regenerate: go test -run TestKustomizeBase -update .):\nkustomize:\n%s\nchart:\n%s", k, toYAML(t, got[k].Object), toYAML(t, w.Object))
		}
	}
}

// TestKustomizeOverlayMatchesChartOptions: the production overlay turns on what the
// chart turns on with the same options (replicas 2, allow-secrets): the same RBAC rules,
// the same PodDisruptionBudget and leader-election Role.
func TestKustomizeOverlayMatchesChartOptions(t *testing.T) {
	overlay := map[string]*unstructured.Unstructured{}
	for _, o := range kustomizeBuild(t, kustomizeDir(t, "overlays", "production")) {
		overlay[objectKey(o)] = o
	}
	chart := map[string]*unstructured.Unstructured{}
	objs, err := decodeObjects(joinManifests(renderChart(t, templateMode, requiredValues+"replicaCount: 2\nflags:\n  allow-secrets: true\n")))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		chart[objectKey(o)] = o
	}
	if !reflect.DeepEqual(sortedKeys(overlay), sortedKeys(chart)) {
		t.Fatalf("overlay objects %v, chart with the same options %v", sortedKeys(overlay), sortedKeys(chart))
	}
	for _, tc := range []struct {
		key  string
		path []string
	}{
		{"rbac.authorization.k8s.io/ClusterRole//configmap-attacher", []string{"rules"}},
		{"rbac.authorization.k8s.io/Role/configmap-attacher/configmap-attacher-leader-election", []string{"rules"}},
		{"policy/PodDisruptionBudget/configmap-attacher/configmap-attacher", []string{"spec"}},
		{"apps/Deployment/configmap-attacher/configmap-attacher", []string{"spec", "replicas"}},
		{"apps/Deployment/configmap-attacher/configmap-attacher", []string{"spec", "template", "spec", "topologySpreadConstraints"}},
	} {
		t.Run(tc.key, func(t *testing.T) {
			o, c := overlay[tc.key], chart[tc.key]
			if o == nil || c == nil {
				t.Fatalf("missing: overlay %v, chart %v", o != nil, c != nil)
			}
			ov, _, _ := unstructured.NestedFieldNoCopy(o.Object, tc.path...)
			cv, _, _ := unstructured.NestedFieldNoCopy(c.Object, tc.path...)
			if !reflect.DeepEqual(ov, cv) {
				t.Errorf("overlay:\n%s\nchart:\n%s", toYAML(t, ov), toYAML(t, cv))
			}
		})
	}
	args, _, _ := unstructured.NestedSlice(overlay["apps/Deployment/configmap-attacher/configmap-attacher"].Object,
		"spec", "template", "spec", "containers")
	for _, want := range []string{"--allow-secrets=true", "--leader-elect=true", "--leader-elect-namespace=configmap-attacher"} {
		if !strings.Contains(toYAML(t, args), want) {
			t.Errorf("overlay Deployment does not pass %s:\n%s", want, toYAML(t, args))
		}
	}
}

func objectKey(o *unstructured.Unstructured) string {
	gv := o.GroupVersionKind().Group
	return gv + "/" + o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
}

func sortedKeys(m map[string]*unstructured.Unstructured) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
