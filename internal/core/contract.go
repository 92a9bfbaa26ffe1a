package core

// The user-facing contract (docs/design.md, "User-facing contract"). Every label and
// annotation the project reads uses the configmap-attacher.io/ prefix.
const (
	// Prefix is the label and annotation prefix.
	Prefix = "configmap-attacher.io/"
	// LabelRevision opts a ConfigMap or Secret in: value "true" marks it as a config
	// revision that may be attached to ReplicaSets and garbage-collected.
	LabelRevision = Prefix + "revision"
	// LabelFamily groups the revisions of one logical config (used by keep-N).
	LabelFamily = Prefix + "family"
	// AnnotationConfigMaps on a Rollout, Deployment or pod template lists extra
	// ConfigMap names (comma separated) to attach even without the opt-in label.
	AnnotationConfigMaps = Prefix + "configmaps"
	// AnnotationSecrets is AnnotationConfigMaps for Secrets.
	AnnotationSecrets = Prefix + "secrets"
	// AnnotationSkip "true" on a workload, pod template, ConfigMap or Secret means
	// never attach or collect it.
	AnnotationSkip = Prefix + "skip"
	// DefaultSelector is the label selector an object found by discovery must match.
	DefaultSelector = LabelRevision + "=true"
	// FieldManager names this program's writes in managedFields and audit logs.
	FieldManager = "configmap-attacher"
)

// Kind is the kind of a config object the core may attach.
type Kind string

// The kinds of config object the core handles.
const (
	KindConfigMap Kind = "ConfigMap"
	KindSecret    Kind = "Secret"
)

// Argo Rollouts identifiers (github.com/argoproj/argo-rollouts, API group argoproj.io).
const (
	RolloutGroup      = "argoproj.io"
	RolloutVersion    = "v1alpha1"
	RolloutKind       = "Rollout"
	RolloutResource   = "rollouts"
	RolloutHashLabel  = "rollouts-pod-template-hash"
	DeploymentHashKey = "pod-template-hash"
	// DeploymentRevisionAnnotation is set by the Deployment controller on a
	// Deployment and its ReplicaSets (k8s.io/kubernetes/pkg/controller/deployment/util).
	DeploymentRevisionAnnotation = "deployment.kubernetes.io/revision"
)
