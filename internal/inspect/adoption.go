package inspect

import (
	"context"
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
)

// Adoption: what a team with existing config meets first. The plan covers opted-in
// revisions only; status also lists the namespace's other config objects (metadata
// only) to show references that are not opted in (with the fix), objects attached by
// name without the label, and references to objects that do not exist.

// ConfigRef is a config object a workload references, with who references it.
type ConfigRef struct {
	Kind core.Kind `json:"kind"`
	Name string    `json:"name"`
	// UsedBy lists the referencing objects, as "Kind/name".
	UsedBy []string `json:"usedBy"`
}

// OptInFix is the exact change that opts the not-opted-in objects in, three ways.
type OptInFix struct {
	Kubectl   []string `json:"kubectl"`
	Kustomize string   `json:"kustomize"`
	Helm      string   `json:"helm"`
}

// rootCA is the ConfigMap the kube-root-ca-cert-publisher puts in every namespace and
// every Pod mounts: never a revision, never reported.
const rootCA = "kube-root-ca.crt"

// listOthers returns the namespace's ConfigMaps (and Secrets) that the plan does not
// cover, as revisions' metadata; nil when they may not be listed (then status shows no
// adoption hints rather than wrong ones).
func listOthers(ctx context.Context, md metadata.Interface, ns string, secrets bool, plan *gc.Plan) []gc.Revision {
	inPlan := map[string]bool{}
	for _, it := range plan.Items {
		inPlan[string(it.Kind)+"/"+it.Name] = true
	}
	kinds := []core.Kind{core.KindConfigMap}
	if secrets {
		kinds = append(kinds, core.KindSecret)
	}
	out := []gc.Revision{}
	for _, k := range kinds {
		list, err := md.Resource(k.GVR()).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil
		}
		for i := range list.Items {
			m := &list.Items[i].ObjectMeta
			if !inPlan[string(k)+"/"+m.Name] && m.Name != rootCA {
				out = append(out, gc.RevisionFromMeta(k, m))
			}
		}
	}
	return out
}

// adoption fills the groups' not-opted-in and dangling references, from the workloads'
// references and the objects outside the plan (others; nil: unknown, nothing is said).
// groupFor returns (creating it) the group a workload is shown in.
func adoption(rep *Report, snap *gc.Snapshot, others []gc.Revision, inPlan map[string]gc.Item, secrets bool,
	groupFor func(*gc.Workload) *WorkloadStatus) {
	if others == nil {
		return
	}
	byKey := map[string]gc.Revision{}
	for _, r := range others {
		byKey[string(r.Kind)+"/"+r.Name] = r
	}
	var fixNames []string
	seenFix := map[string]bool{}
	for i := range snap.Workloads {
		w := &snap.Workloads[i]
		if w.Kind == "ControllerRevision" {
			continue // an earlier template: what it names may rightly be gone
		}
		for _, ref := range w.Refs {
			key := string(ref.Kind) + "/" + ref.Name
			if _, ok := inPlan[key]; ok || ref.Name == rootCA || (ref.Kind == core.KindSecret && !secrets) {
				continue
			}
			user := w.Kind + "/" + w.Name
			r, exists := byKey[key]
			switch {
			case !exists && !ref.Optional:
				g := groupFor(w)
				g.Dangling = addConfigRef(g.Dangling, ref, user)
			case exists && !ref.Explicit && !ownedByName(r):
				g := groupFor(w)
				g.NotOptedIn = addConfigRef(g.NotOptedIn, ref, user)
				if !seenFix[key] {
					seenFix[key] = true
					fixNames = append(fixNames, key)
				}
			}
		}
	}
	if len(fixNames) > 0 {
		rep.OptIn = NewOptInFix(rep.Namespace, fixNames)
	}
}

func addConfigRef(list []ConfigRef, ref core.Ref, user string) []ConfigRef {
	for i := range list {
		if list[i].Kind == ref.Kind && list[i].Name == ref.Name {
			if !contains(list[i].UsedBy, user) {
				list[i].UsedBy = append(list[i].UsedBy, user)
			}
			return list
		}
	}
	return append(list, ConfigRef{Kind: ref.Kind, Name: ref.Name, UsedBy: []string{user}})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ownedByName reports whether an object outside the plan has a ReplicaSet owner, or
// another owner of the kinds the service adds (core.CollectorOwner): it was attached by
// name (an annotation or a command line) without the opt-in label, and every live user
// of it is attached too (safety rule 11).
func ownedByName(r gc.Revision) bool {
	for _, o := range r.OwnerReferences {
		if o.Kind == "ReplicaSet" {
			return true
		}
	}
	_, held := core.CollectorOwner(r.OwnerReferences)
	return held
}

// NewOptInFix builds the exact fix for keys ("Kind/name") in namespace ns.
func NewOptInFix(ns string, keys []string) *OptInFix {
	sort.Strings(keys)
	byKind := map[string][]string{}
	var kinds []string
	for _, k := range keys {
		kind, name, _ := strings.Cut(k, "/")
		if byKind[kind] == nil {
			kinds = append(kinds, kind)
		}
		byKind[kind] = append(byKind[kind], name)
	}
	fix := &OptInFix{
		Kustomize: "generatorOptions:\n  labels:\n    " + core.LabelRevision + ": \"true\"",
		// the annotation keeps `helm upgrade` from deleting the revision a rollback returns
		// to (README, "Opting existing config in").
		Helm: "metadata:\n  labels:\n    " + core.LabelRevision + ": \"true\"\n  annotations:\n    helm.sh/resource-policy: keep",
	}
	for _, kind := range kinds {
		fix.Kubectl = append(fix.Kubectl, fmt.Sprintf("kubectl label %s -n %s %s %s=true",
			strings.ToLower(kind), ns, strings.Join(byKind[kind], " "), core.LabelRevision))
	}
	return fix
}

// AttachedByName lists namespace ns's config objects that a ReplicaSet owns but that
// carry no opt-in label ("Kind/name"): the sweep never considers them, the garbage
// collector deletes each with its last owner. Nothing is said when they may not be listed.
func AttachedByName(ctx context.Context, md metadata.Interface, ns string, secrets bool) []string {
	others := listOthers(ctx, md, ns, secrets, &gc.Plan{})
	var out []string
	for _, r := range others {
		if r.Labels[core.LabelRevision] != "true" && ownedByName(r) {
			out = append(out, string(r.Kind)+"/"+r.Name)
		}
	}
	return out
}
