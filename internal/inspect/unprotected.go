package inspect

import (
	"context"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
)

// UnprotectedItem is an attached revision that a neighbour still deletes whatever its
// ReplicaSet owners (core.Unprotected), with the fix.
type UnprotectedItem struct {
	Kind    core.Kind `json:"kind"`
	Name    string    `json:"name"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Fix     string    `json:"fix"`
	// OwnedBy are the ReplicaSets that own it.
	OwnedBy []string `json:"ownedBy"`
}

// unprotected lists the namespace's revisions owned by a ReplicaSet that a neighbour
// deletes anyway: an ExternalSecret that writes it under a target name of its own, a
// revision or Application opting into controller-only owner references.
func unprotected(revs ...[]gc.Revision) []UnprotectedItem {
	var out []UnprotectedItem
	seen := map[string]bool{}
	for _, list := range revs {
		for _, r := range list {
			key := string(r.Kind) + "/" + r.Name
			owners := replicaSetOwners(r.OwnerReferences)
			if seen[key] || len(owners) == 0 {
				continue
			}
			seen[key] = true
			meta := &metav1.ObjectMeta{Name: r.Name, Labels: r.Labels, Annotations: r.Annotations, OwnerReferences: r.OwnerReferences}
			for _, w := range core.Unprotected(r.Kind, meta) {
				out = append(out, UnprotectedItem{Kind: r.Kind, Name: r.Name, Reason: w.Reason, Message: w.Message, Fix: w.Fix, OwnedBy: owners})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func replicaSetOwners(refs []metav1.OwnerReference) []string {
	var out []string
	for _, o := range refs {
		if o.Kind == "ReplicaSet" {
			out = append(out, o.Name)
		}
	}
	return out
}

// addAppUnprotected adds the revisions whose Argo CD Application turns the owners'
// protection off (core.OwnerProtectionOff), read with apps; an Application that
// cannot be read (no permission, no Argo CD) adds nothing.
func addAppUnprotected(ctx context.Context, apps core.ApplicationReader, rep *Report, revs []gc.Revision) {
	for _, r := range revs {
		owners := replicaSetOwners(r.OwnerReferences)
		ns, name, ok := core.TrackingApp(&metav1.ObjectMeta{Labels: r.Labels, Annotations: r.Annotations})
		if len(owners) == 0 || !ok || core.SyncOptions(r.Annotations[core.ArgoCDSyncOptions])["Prune"] == "false" {
			continue
		}
		opts, err := apps.SyncOptions(ctx, ns, name)
		if opt := core.OwnerProtectionOff(opts); err == nil && opt != "" {
			rep.Unprotected = append(rep.Unprotected, UnprotectedItem{Kind: r.Kind, Name: r.Name, OwnedBy: owners,
				Reason: core.ReasonNotProtectedFromPruning, Fix: core.FixAppOwnerProtectionOff,
				Message: fmt.Sprintf("its Argo CD Application %s syncs with %s: an Argo CD that honours it prunes it when Git drops it", name, opt)})
		}
	}
}
