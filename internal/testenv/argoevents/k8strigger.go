package argoevents

import (
	"fmt"
	"strings"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"
)

// Patch strategies of K8sPatchSensor, as Argo Events' k8s trigger spells them.
const (
	PatchMerge     = "application/merge-patch+json"
	PatchStrategic = "application/strategic-merge-patch+json"
)

// k8sPatchSensorYAML is "the no-code alternative" to this project: Argo Events' standard
// Kubernetes trigger patching the ConfigMap a ReplicaSet references with an
// ownerReference to that ReplicaSet, parameters taken from the event payload. It is what
// a user writes by hand from the Argo Events docs; it knows one ConfigMap per ReplicaSet
// (the first container's first envFrom) and checks nothing. The sensor-service GETs the
// ConfigMap, creates it when it is missing, and otherwise PATCHes it with the whole
// parameterised object below.
const k8sPatchSensorYAML = `
apiVersion: argoproj.io/v1alpha1
kind: Sensor
metadata:
  name: k8s-patch-baseline
  namespace: argo-events
spec:
  dependencies:
    - name: replicasets
      eventSourceName: configmap-attacher
      eventName: deployment-replicasets
  triggers:
    - template:
        name: patch-owner
        k8s:
          operation: patch
          patchStrategy: PATCH_STRATEGY
          source:
            resource:
              apiVersion: v1
              kind: ConfigMap
              metadata:
                name: placeholder
                namespace: placeholder
                ownerReferences:
                  - apiVersion: apps/v1
                    kind: ReplicaSet
                    name: placeholder
                    uid: placeholder
                    controller: false
          parameters:
            - src:
                dependencyName: replicasets
                dataKey: body.spec.template.spec.containers.0.envFrom.0.configMapRef.name
              dest: metadata.name
            - src:
                dependencyName: replicasets
                dataKey: body.metadata.namespace
              dest: metadata.namespace
            - src:
                dependencyName: replicasets
                dataKey: body.metadata.name
              dest: metadata.ownerReferences.0.name
            - src:
                dependencyName: replicasets
                dataKey: body.metadata.uid
              dest: metadata.ownerReferences.0.uid
`

// K8sPatchSensor returns the standard-k8s-trigger baseline Sensor (see
// k8sPatchSensorYAML) with patchStrategy PatchMerge or PatchStrategic.
func K8sPatchSensor(patchStrategy string) (*v1alpha1.Sensor, error) {
	if patchStrategy != PatchMerge && patchStrategy != PatchStrategic {
		return nil, fmt.Errorf("argoevents: patch strategy %q: want %s or %s", patchStrategy, PatchMerge, PatchStrategic)
	}
	return LoadSensor([]byte(strings.Replace(k8sPatchSensorYAML, "PATCH_STRATEGY", patchStrategy, 1)))
}
