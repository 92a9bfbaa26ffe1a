package argocd_test

import (
	"fmt"
	"strings"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argocd"
)

// The Git side of a scenario: a Rollout whose config is a Kustomize configMapGenerator
// (hash-suffixed names, opted in through generatorOptions), as users write it. Nothing
// carries a Prune or compare annotation.

// rolloutYAML is the Rollout: one replica, a canary without steps (each new template
// goes straight to 100%), revisionHistoryLimit 1 (one old ReplicaSet is kept).
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
// ConfigMaps, so that the generated name (with its hash) is written into it (the
// configuration Argo Rollouts documents for Kustomize).
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

// webFiles is the app folder dir with config version v; annotations (key: value lines)
// go on the generated ConfigMaps through generatorOptions.
func webFiles(dir string, v int, annotations ...string) map[string]string {
	var ann string
	if len(annotations) > 0 {
		ann = "  annotations:\n    " + strings.Join(annotations, "\n    ") + "\n"
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
configurations:
  - rollout-transform.yaml
resources:
  - rollout.yaml
generatorOptions:
  labels:
    configmap-attacher.io/revision: "true"
%sconfigMapGenerator:
  - name: web-config
    literals:
      - version=%d
`, ann, v)
	return map[string]string{
		dir + "/kustomization.yaml":     kustomization,
		dir + "/rollout.yaml":           rolloutYAML,
		dir + "/rollout-transform.yaml": rolloutTransformYAML,
	}
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
