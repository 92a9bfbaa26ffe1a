//go:build flux

package flux_test

import "github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"

// The Git side of a scenario, as users write it for Flux: a Kustomize overlay in web/
// with a Rollout (testfix.RolloutYAML) whose config is a configMapGenerator (a
// hash-suffixed name per commit, opted in through generatorOptions), and a second
// opted-in generator that nothing uses (a revision the service never attaches: Flux's to
// prune). Nothing carries a Flux annotation.

// webFiles is the web/ folder at config version v.
func webFiles(v int) map[string]string {
	return testfix.RolloutApp("web", "", testfix.ConfigMapGenerator("web-config", v)+testfix.ConfigMapGenerator("spare-config", v))
}
