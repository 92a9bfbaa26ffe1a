package core

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// Neighbours that delete a revision whatever its ReplicaSet owners say (docs/design.md,
// "Neighbours that delete what the owners keep"). The service reports them when it
// attaches such a revision: nothing it writes would keep the revision.
const (
	// ESOCreatedByLabel is the label the External Secrets Operator puts on the Secret an
	// ExternalSecret with creationPolicy Owner writes. Its orphan cleanup deletes every
	// Secret carrying its ExternalSecret's value whose name is no longer the target name,
	// whatever other owners it has.
	ESOCreatedByLabel = "reconcile.external-secrets.io/created-by"
	// ESOGroup is the API group of ExternalSecret.
	ESOGroup = "external-secrets.io"
	// ArgoCDSyncOptions is Argo CD's per-object sync options annotation ("A=true,B=false").
	ArgoCDSyncOptions = "argocd.argoproj.io/sync-options"
	// ArgoCDControllerReferencesOnly is the per-object sync option of argo-cd #24814
	// (not released): Argo CD would count only controller owners when it decides whether
	// it manages, and so may prune, an object. A revision's ReplicaSet owners are not
	// controllers.
	ArgoCDControllerReferencesOnly = "ControllerReferencesOnly"
)

// Reasons of the Warning Events and of ObjectResult.Warnings.
const (
	// ReasonExternalSecretRename: the Secret is written by an ExternalSecret under a
	// target name of its own, so renaming the target deletes it (the "rename the target"
	// pattern).
	ReasonExternalSecretRename = "ExternalSecretTargetRename"
	// ReasonNotProtectedFromPruning: the revision (or its Argo CD Application) opts into
	// controller-only owner references, so Argo CD would prune it while it is used.
	ReasonNotProtectedFromPruning = "NotProtectedFromPruning"
)

// Warning is a reason an attached revision is still not protected by its owners.
type Warning struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Fix is what the user changes so that the owners protect the revision again.
	Fix string `json:"fix"`
	// Subject, when set, is the other object the warning is about (the ExternalSecret
	// that writes the Secret).
	Subject *metav1.OwnerReference `json:"subject,omitempty"`
}

// FixExternalSecretRename and FixControllerReferencesOnly are the documented fixes
// (README, "External Secrets" and "Argo CD's coming options").
const (
	FixExternalSecretRename = "use one ExternalSecret per revision: give the ExternalSecret the revision's name " +
		"(a hash suffix, as Kustomize or Helm make) and leave spec.target.name unset, so every release writes a new " +
		"ExternalSecret and Secret and the previous pair stays until its last ReplicaSet is gone"
	FixControllerReferencesOnly = "remove ControllerReferencesOnly=true from the revision's " + ArgoCDSyncOptions +
		" annotation (or add Prune=false beside it)"
)

// Unprotected returns the reasons the revision described by meta (its labels,
// annotations and ownerReferences) is not protected by ReplicaSet owners: a neighbour
// that would delete it anyway. Pure: it reads nothing.
func Unprotected(kind Kind, meta *metav1.ObjectMeta) []Warning {
	var out []Warning
	if es := renamableExternalSecret(kind, meta); es != nil {
		out = append(out, Warning{Reason: ReasonExternalSecretRename, Subject: es, Fix: FixExternalSecretRename,
			Message: fmt.Sprintf("Secret %s is written by ExternalSecret %s under another name (spec.target.name): "+
				"if a release renames the target, External Secrets deletes %s at once, whatever ReplicaSets own it",
				meta.Name, es.Name, meta.Name)})
	}
	opts := SyncOptions(meta.Annotations[ArgoCDSyncOptions])
	if opts[ArgoCDControllerReferencesOnly] == "true" && opts["Prune"] != "false" {
		out = append(out, Warning{Reason: ReasonNotProtectedFromPruning, Fix: FixControllerReferencesOnly,
			Message: fmt.Sprintf("%s %s is not protected from pruning: its %s has %s=true, so an Argo CD that honours it "+
				"(argo-cd #24814) ignores its ReplicaSet owners and prunes it when Git drops it", kind, meta.Name,
				ArgoCDSyncOptions, ArgoCDControllerReferencesOnly)})
	}
	return out
}

// renamableExternalSecret returns the controller ExternalSecret of a Secret ESO wrote
// with creationPolicy Owner under a name that is not the ExternalSecret's own, or nil.
func renamableExternalSecret(kind Kind, meta *metav1.ObjectMeta) *metav1.OwnerReference {
	if kind != KindSecret || meta.Labels[ESOCreatedByLabel] == "" {
		return nil
	}
	c := metav1.GetControllerOfNoCopy(meta)
	if c == nil || c.Kind != "ExternalSecret" || groupOf(c.APIVersion) != ESOGroup || c.Name == meta.Name {
		return nil
	}
	ref := *c
	return &ref
}

func groupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ""
	}
	return gv.Group
}

// SyncOptions parses Argo CD's sync options ("A=true, B=false") into a map; options
// without "=" map to "".
func SyncOptions(s string) map[string]string {
	out := map[string]string{}
	for _, o := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(o), "=")
		if k != "" {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// warn records a Warning Event for each warning on the revision, on the ReplicaSets
// just added as its owners and on the warning's subject (the ExternalSecret), and logs it.
func (a *Attacher) warn(kind Kind, ns, name string, uid types.UID, warnings []Warning, added []metav1.OwnerReference) {
	for _, w := range warnings {
		a.log.Warn("attached, but not protected", "kind", kind, "namespace", ns, "name", name, "reason", w.Reason,
			"message", w.Message, "fix", w.Fix)
		if a.cfg.Recorder == nil {
			continue
		}
		msg := w.Message + ". Fix: " + w.Fix
		var subjects []runtime.Object
		if w.Subject != nil {
			subjects = append(subjects, objectOf(ns, *w.Subject))
		} else {
			subjects = append(subjects, configObject(kind, ns, name, uid))
		}
		for _, o := range added {
			if o.Kind == "ReplicaSet" {
				subjects = append(subjects, objectOf(ns, o))
			}
		}
		for _, s := range subjects {
			a.cfg.Recorder.Eventf(s, corev1.EventTypeWarning, w.Reason, "%s", clipTo(msg, 1024))
		}
	}
}

// objectOf is an object reference for Events: the owner's kind, name and UID.
func objectOf(ns string, o metav1.OwnerReference) runtime.Object {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(o.APIVersion)
	u.SetKind(o.Kind)
	u.SetNamespace(ns)
	u.SetName(o.Name)
	u.SetUID(o.UID)
	return u
}

func configObject(kind Kind, ns, name string, uid types.UID) runtime.Object {
	om := metav1.ObjectMeta{Name: name, Namespace: ns, UID: uid}
	if kind == KindSecret {
		return &corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: om}
	}
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: om}
}
