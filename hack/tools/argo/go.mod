// Tools module: builds the real Argo Events binary (eventsource-service and
// sensor-service) and pins the Argo Events and Argo Rollouts modules whose own
// CRD manifests the local control plane installs at run time.
module github.com/configmap-attacher/configmap-attacher/hack/tools/argo

go 1.26

require (
	github.com/argoproj/argo-events v1.9.11
	github.com/argoproj/argo-rollouts v1.8.3
)
