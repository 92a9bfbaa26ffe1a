package deploytest

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// kustomizeCLI runs the repository's own kustomize binary (make tools: bin/kustomize,
// the one Argo CD's repo-server runs in internal/testenv/argocd) on dir: kustomize build DIR.
func kustomizeCLI(t *testing.T, build string) []*unstructured.Unstructured {
	t.Helper()
	dir := cmp.Or(os.Getenv("CONFIGMAP_ATTACHER_BIN_DIR"), filepath.Join(repoRoot(t), "bin")) // as the control plane's binaries
	bin := filepath.Join(dir, "kustomize")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s: %v (run make tools)", bin, err)
	}
	out, err := exec.Command(bin, "build", build).CombinedOutput()
	if err != nil {
		t.Fatalf("kustomize build %s: %v\n%s", build, err, out)
	}
	objs, err := decodeObjects(string(out))
	if err != nil {
		t.Fatalf("kustomize build %s: %v", build, err)
	}
	return objs
}

// rolloutRefs are the config names the Rollout's pod template uses, by where.
func rolloutRefs(t *testing.T, objs []*unstructured.Unstructured) map[string]string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() != "Rollout" {
			continue
		}
		spec, _, _ := unstructured.NestedMap(o.Object, "spec", "template", "spec")
		c := spec["containers"].([]any)[0].(map[string]any)
		env := c["env"].([]any)[0].(map[string]any)
		return map[string]string{
			"volume":       spec["volumes"].([]any)[0].(map[string]any)["configMap"].(map[string]any)["name"].(string),
			"envFrom":      c["envFrom"].([]any)[0].(map[string]any)["configMapRef"].(map[string]any)["name"].(string),
			"secretKeyRef": env["valueFrom"].(map[string]any)["secretKeyRef"].(map[string]any)["name"].(string),
		}
	}
	t.Fatal("no Rollout in the build")
	return nil
}

// The README's Kustomize recipe for Argo Rollouts (deploy/kustomize/rollouts): with the
// configuration the Rollout names the generated, hashed ConfigMap and Secret, which carry
// the opt-in label, and the build passes a server-side dry run; without it (the recipe
// before issue 29) the Rollout keeps the unhashed names, which no object has.
func TestKustomizeRecipeWritesHashedNamesIntoTheRollout(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy", "kustomize", "rollouts")
	objs := kustomizeCLI(t, dir)
	generated := map[string]string{}
	for _, o := range objs {
		if k := o.GetKind(); k == "ConfigMap" || k == "Secret" {
			if o.GetLabels()["configmap-attacher.io/revision"] != "true" {
				t.Errorf("%s %s has no opt-in label", k, o.GetName())
			}
			generated[k] = o.GetName()
		}
	}
	if !strings.HasPrefix(generated["ConfigMap"], "web-config-") || !strings.HasPrefix(generated["Secret"], "web-credentials-") {
		t.Fatalf("generated %v, want hashed web-config-* and web-credentials-*", generated)
	}
	want := map[string]string{"volume": generated["ConfigMap"], "envFrom": generated["ConfigMap"], "secretKeyRef": generated["Secret"]}
	if got := rolloutRefs(t, objs); !maps.Equal(got, want) {
		t.Errorf("the Rollout names %v, want the generated %v", got, want)
	}

	t.Run("without the configuration the Rollout keeps the unhashed names", func(t *testing.T) {
		tmp := t.TempDir()
		for _, f := range []string{"rollout.yaml", "rollouts-config.yaml"} {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tmp, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		k, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		without := strings.Replace(string(k), "configurations:\n  - rollouts-config.yaml\n", "", 1)
		if without == string(k) {
			t.Fatal("kustomization.yaml has no configurations entry")
		}
		if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), []byte(without), 0o644); err != nil {
			t.Fatal(err)
		}
		got := rolloutRefs(t, kustomizeCLI(t, tmp))
		if got["volume"] != "web-config" || got["secretKeyRef"] != "web-credentials" {
			t.Errorf("without the configuration the Rollout names %v, want the unhashed names", got)
		}
	})

	t.Run("server-side dry run", func(t *testing.T) {
		c := controlplane.Require(t, cp)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		ensureNamespace(t, ctx, "shop")
		dc := dynamic.NewForConfigOrDie(c.RESTConfig())
		gvr := map[string]schema.GroupVersionResource{
			"ConfigMap": {Version: "v1", Resource: "configmaps"}, "Secret": {Version: "v1", Resource: "secrets"},
			"Rollout": {Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}}
		for _, o := range objs {
			body, err := json.Marshal(o.Object)
			if err != nil {
				t.Fatal(err)
			}
			force := true
			if _, err := dc.Resource(gvr[o.GetKind()]).Namespace(o.GetNamespace()).Patch(ctx, o.GetName(), types.ApplyPatchType, body,
				metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: "deploy-test", Force: &force, FieldValidation: "Strict"}); err != nil {
				t.Errorf("server-side dry run of %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
		}
	})
}
