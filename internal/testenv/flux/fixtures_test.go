//go:build flux

package flux_test

import (
	"fmt"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// The Git side of a scenario, as users write it for Flux: a Kustomize overlay in web/
// with a Rollout (testfix.RolloutYAML) whose config is a configMapGenerator (a
// hash-suffixed name per commit, opted in through generatorOptions), and a second
// opted-in generator that nothing uses (a revision the service never attaches: Flux's to
// prune). Nothing carries a Flux annotation.

// webFiles is the web/ folder at config version v.
func webFiles(v int) map[string]string {
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
configurations:
  - rollout-transform.yaml
resources:
  - rollout.yaml
generatorOptions:
  labels:
    configmap-attacher.io/revision: "true"
configMapGenerator:
  - name: web-config
    literals:
      - version=%d
  - name: spare-config
    literals:
      - version=%d
`, v, v)
	return map[string]string{
		"web/kustomization.yaml":     kustomization,
		"web/rollout.yaml":           testfix.RolloutYAML,
		"web/rollout-transform.yaml": testfix.RolloutTransformYAML,
	}
}
