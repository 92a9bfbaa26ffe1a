//go:build flux

package flux_test

import "fmt"

// The Git side of a scenario, as users write it for Flux: a Kustomize overlay in web/
// with a Rollout whose config is a configMapGenerator (a hash-suffixed name per commit,
// opted in through generatorOptions), and a second opted-in generator that nothing uses
// (a revision the service never attaches: Flux's to prune). Nothing carries a Flux
// annotation.

// rolloutYAML is the Rollout: one replica, a canary without steps (each new template goes
// straight to 100%), revisionHistoryLimit 1 (one old ReplicaSet is kept).
const rolloutYAML = `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: web
spec:
  replicas: 1
  revisionHistoryLimit: 1
  selector:
    matchLabels:
      app: web
  strategy:
    canary: {}
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: web
          image: registry.example/web:1
          volumeMounts:
            - name: config
              mountPath: /etc/web
      volumes:
        - name: config
          configMap:
            name: web-config
`

// rolloutTransformYAML teaches Kustomize that a Rollout's pod template references
// ConfigMaps (the configuration Argo Rollouts documents for Kustomize), so the generated
// name is written into it.
const rolloutTransformYAML = `nameReference:
  - kind: ConfigMap
    version: v1
    fieldSpecs:
      - path: spec/template/spec/volumes/configMap/name
        kind: Rollout
      - path: spec/template/spec/containers/envFrom/configMapRef/name
        kind: Rollout
      - path: spec/template/spec/containers/env/valueFrom/configMapKeyRef/name
        kind: Rollout
`

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
		"web/rollout.yaml":           rolloutYAML,
		"web/rollout-transform.yaml": rolloutTransformYAML,
	}
}
