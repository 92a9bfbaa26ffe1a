package testfix

import "fmt"

// The Git side of the GitOps scenarios (Argo CD, Flux): a Rollout whose config is a
// Kustomize configMapGenerator (hash-suffixed names, opted in through generatorOptions),
// as users write it.

// RolloutYAML is the Rollout "web": one replica, a canary without steps (each new template
// goes straight to 100%), revisionHistoryLimit 1 (one old ReplicaSet is kept), mounting
// ConfigMap web-config.
const RolloutYAML = `apiVersion: argoproj.io/v1alpha1
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

// RolloutTransformYAML teaches Kustomize that a Rollout's pod template references
// ConfigMaps, so that the generated name (with its hash) is written into it (the
// configuration Argo Rollouts documents for Kustomize).
const RolloutTransformYAML = `nameReference:
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

// RolloutApp is the files of an app folder dir: a kustomization.yaml applying RolloutYAML
// with RolloutTransformYAML, whose generated ConfigMaps are opted in (generatorOptions:
// the revision label, then the lines of options, such as annotations) and made by the
// configMapGenerator entries generators (ConfigMapGenerator).
func RolloutApp(dir, options, generators string) map[string]string {
	kustomization := `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
configurations:
  - rollout-transform.yaml
resources:
  - rollout.yaml
generatorOptions:
  labels:
    configmap-attacher.io/revision: "true"
` + options + "configMapGenerator:\n" + generators
	return map[string]string{
		dir + "/kustomization.yaml":     kustomization,
		dir + "/rollout.yaml":           RolloutYAML,
		dir + "/rollout-transform.yaml": RolloutTransformYAML,
	}
}

// ConfigMapGenerator is a configMapGenerator entry: ConfigMap name holding version=v.
func ConfigMapGenerator(name string, v int) string {
	return fmt.Sprintf("  - name: %s\n    literals:\n      - version=%d\n", name, v)
}
