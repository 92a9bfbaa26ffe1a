package deploytest

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// manifestSet is one thing users apply: a chart rendering, a kustomize build, a file.
type manifestSet struct {
	name string
	objs func(t *testing.T) []*unstructured.Unstructured
}

func shippedManifests() []manifestSet {
	var sets []manifestSet
	for _, vs := range valueSets {
		sets = append(sets, manifestSet{"helm/" + vs.name, func(t *testing.T) []*unstructured.Unstructured {
			objs, err := decodeObjects(joinManifests(renderChart(t, templateMode, vs.values)))
			if err != nil {
				t.Fatal(err)
			}
			return objs
		}})
	}
	sets = append(sets, manifestSet{"argocd/chart", func(t *testing.T) []*unstructured.Unstructured {
		var objs []*unstructured.Unstructured
		for _, r := range argoCDChartRenders(t) {
			objs = append(objs, r.render(t)...)
		}
		return objs
	}})
	for _, dir := range []string{"deploy/kustomize/base", "deploy/kustomize/overlays/production", "deploy/argo-events"} {
		sets = append(sets, manifestSet{"kustomize/" + dir, func(t *testing.T) []*unstructured.Unstructured {
			return kustomizeBuild(t, filepath.Join(repoRoot(t), dir))
		}})
	}
	sets = append(sets, exampleManifestSets()...)
	for _, glob := range []string{"deploy/argocd/*.yaml", "deploy/argocd/apps/*.yaml", "eventsource/*.yaml", "sensor/*.yaml"} {
		sets = append(sets, manifestSet{"files/" + glob, func(t *testing.T) []*unstructured.Unstructured {
			files, err := filepath.Glob(filepath.Join(repoRoot(t), glob))
			if err != nil || len(files) == 0 {
				t.Fatalf("no files %s (%v)", glob, err)
			}
			sort.Strings(files)
			var objs []*unstructured.Unstructured
			for _, f := range files {
				objs = append(objs, objectsFromFile(t, f)...)
			}
			return objs
		}})
	}
	return sets
}

// TestManifestsServerSideDryRun applies every shipped manifest (the chart with default values
// and with every option on, the chart as the shipped Argo CD Applications render it, the
// Kustomize base and overlay, the Argo Events and Argo CD objects, the EventSource and Sensors) to the local control plane with a server-side
// apply in dry-run mode: schema validation of the built-in kinds and of the CRDs from the
// pinned Argo Rollouts, Argo Events, Argo CD, cert-manager and Prometheus Operator modules.
func TestManifestsServerSideDryRun(t *testing.T) {
	c := controlplane.Require(t, cp)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dc, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	installExtraCRDs(t, ctx, dc)
	for _, ns := range []string{releaseNamespace, "argo-events", "argocd"} {
		ensureNamespace(t, ctx, ns)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	for _, set := range shippedManifests() {
		t.Run(set.name, func(t *testing.T) {
			objs := set.objs(t)
			if len(objs) == 0 {
				t.Fatal("no objects")
			}
			for _, o := range objs {
				gvk := o.GroupVersionKind()
				m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
				if err != nil {
					t.Errorf("%s %s: no such API on the server: %v", gvk, o.GetName(), err)
					continue
				}
				body, err := json.Marshal(o.Object)
				if err != nil {
					t.Fatal(err)
				}
				ri := dynamic.ResourceInterface(dc.Resource(m.Resource))
				if m.Scope.Name() == "namespace" {
					ns := o.GetNamespace()
					if ns == "" {
						t.Errorf("%s %s has no namespace", gvk.Kind, o.GetName())
						continue
					}
					ri = dc.Resource(m.Resource).Namespace(ns)
				}
				force := true
				if _, err := ri.Patch(ctx, o.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
					DryRun: []string{metav1.DryRunAll}, FieldManager: "deploy-test", Force: &force, FieldValidation: "Strict"}); err != nil {
					t.Errorf("server-side dry run of %s %s/%s: %v", gvk.Kind, o.GetNamespace(), o.GetName(), err)
				}
			}
			t.Logf("%d objects accepted", len(objs))
		})
	}
}

// TestChartTemplateEqualsInstall renders the chart as `helm template` does (default
// capabilities, no cluster) and as `helm install` does (the live cluster's version and
// APIs, lookup wired to it): the bytes must be the same for every option set.
func TestChartTemplateEqualsInstall(t *testing.T) {
	c := controlplane.Require(t, cp)
	disc, err := discovery.NewDiscoveryClientForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	sv, err := disc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	_, lists, err := disc.ServerGroupsAndResources()
	if err != nil {
		t.Fatal(err)
	}
	var apis chartutil.VersionSet
	for _, l := range lists {
		apis = append(apis, l.GroupVersion)
		for _, r := range l.APIResources {
			apis = append(apis, fmt.Sprintf("%s/%s", l.GroupVersion, r.Kind))
		}
	}
	install := renderMode{name: "install", cfg: c.RESTConfig(), caps: &chartutil.Capabilities{
		KubeVersion: chartutil.KubeVersion{Version: sv.GitVersion, Major: sv.Major, Minor: sv.Minor},
		APIVersions: apis, HelmVersion: chartutil.DefaultCapabilities.HelmVersion}}
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			tmpl := joinManifests(renderChart(t, templateMode, vs.values))
			inst := joinManifests(renderChart(t, install, vs.values))
			if tmpl != inst {
				t.Errorf("helm template and install render differently:\n%s\n---- install ----\n%s", tmpl, inst)
			}
		})
	}
}
