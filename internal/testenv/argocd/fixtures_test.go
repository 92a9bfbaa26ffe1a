package argocd_test

import (
	"fmt"
	"strings"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argocd"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// The Git side of a scenario: testfix.RolloutYAML, whose config is a Kustomize
// configMapGenerator (hash-suffixed names, opted in through generatorOptions), as users
// write it. Nothing carries a Prune or compare annotation.

// webFiles is the app folder dir with config version v; annotations (key: value lines)
// go on the generated ConfigMaps through generatorOptions.
func webFiles(dir string, v int, annotations ...string) map[string]string {
	var ann string
	if len(annotations) > 0 {
		ann = "  annotations:\n    " + strings.Join(annotations, "\n    ") + "\n"
	}
	return testfix.RolloutApp(dir, ann, testfix.ConfigMapGenerator("web-config", v))
}

// withHistoryLimit sets the Rollout's revisionHistoryLimit in an app folder of webFiles.
func withHistoryLimit(files map[string]string, n int) map[string]string {
	for name, text := range files {
		if strings.HasSuffix(name, "/rollout.yaml") {
			files[name] = strings.Replace(text, "revisionHistoryLimit: 1", fmt.Sprintf("revisionHistoryLimit: %d", n), 1)
		}
	}
	return files
}

// applyModes are the two ways Argo CD applies a revision that the sync tests run in:
// client-side apply, and server-side apply with server-side diff.
var applyModes = []struct {
	name string
	app  argocd.App
}{
	{name: "client-side-apply", app: argocd.App{}},
	{name: "server-side-apply-and-diff", app: argocd.App{SyncOptions: []string{"ServerSideApply=true"}, ServerSideDiff: true}},
}
