package deploytest

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// deployExamples are deploy/examples/*: the chart's values for one way to deploy, and what
// else the example's comment says to apply (kustomize directories and manifest files, from
// the repository root). TestManifestsServerSideDryRun applies each as one set.
var deployExamples = []struct {
	name   string
	extras []string
}{
	{"watch", nil},
	{"argo-events-grpc", []string{"deploy/argo-events", "eventsource/replicasets.eventsource.yaml", "sensor/grpc-trigger.sensor.yaml"}},
	{"argo-events-http", []string{"deploy/argo-events", "eventsource/replicasets.eventsource.yaml", "sensor/http-trigger.sensor.yaml"}},
	{"argo-events-eventbus", []string{"deploy/argo-events", "eventsource/replicasets.eventsource.yaml"}},
	{"hub-argocd", []string{"deploy/multicluster/hub/argocd-cluster-secrets.yaml"}},
	{"fleet-hub", []string{"deploy/multicluster/hub/argocd-cluster-secrets.yaml"}},
	{"mixed-fleet", []string{"deploy/argo-events", "deploy/multicluster/hub/sensor.yaml", "deploy/multicluster/hub/argocd-cluster-secrets.yaml"}},
}

func exampleValues(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "examples", name, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// exampleObjects renders example name as its comment says to install it.
func exampleObjects(t *testing.T, name string, extras []string) []*unstructured.Unstructured {
	objs, err := decodeObjects(joinManifests(renderChart(t, templateMode, exampleValues(t, name))))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range extras {
		p := filepath.Join(repoRoot(t), e)
		if strings.HasSuffix(e, ".yaml") {
			objs = append(objs, objectsFromFile(t, p)...)
		} else {
			objs = append(objs, kustomizeBuild(t, p)...)
		}
	}
	return objs
}

func exampleManifestSets() []manifestSet {
	var sets []manifestSet
	for _, ex := range deployExamples {
		sets = append(sets, manifestSet{"example/" + ex.name, func(t *testing.T) []*unstructured.Unstructured {
			return exampleObjects(t, ex.name, ex.extras)
		}})
	}
	return sets
}

// TestEveryExampleIsTestedAndReferenced: each folder of deploy/examples is in deployExamples
// (so it is rendered and dry-run), each one's comment names the commands that install it,
// and the README's "Choose a way in" table and deploy/examples/README.md point at it.
func TestEveryExampleIsTestedAndReferenced(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(repoRoot(t), "deploy", "examples", "*", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, d := range dirs {
		got = append(got, filepath.Base(filepath.Dir(d)))
	}
	for _, ex := range deployExamples {
		want = append(want, ex.name)
	}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("deploy/examples has %v, the test knows %v", got, want)
	}
	readme, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "examples", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range deployExamples {
		ref := "deploy/examples/" + ex.name
		if !strings.Contains(string(readme), ref) {
			t.Errorf("README.md does not point at %s", ref)
		}
		if !strings.Contains(string(index), "("+ex.name+"/values.yaml)") {
			t.Errorf("deploy/examples/README.md does not link %s/values.yaml", ex.name)
		}
		v := exampleValues(t, ex.name)
		if !strings.Contains(v, "-f "+ref+"/values.yaml") {
			t.Errorf("%s/values.yaml's comment does not say how to install it (helm install ... -f %s/values.yaml)", ref, ref)
		}
		for _, e := range ex.extras {
			if !strings.Contains(v, e) {
				t.Errorf("%s/values.yaml's comment does not name %s, which it needs", ref, e)
			}
		}
	}
}
