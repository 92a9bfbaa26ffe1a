// Package inspect reads what the service has done in a namespace, for `status`: per
// workload, which ReplicaSet owns which config revision and which it uses without
// owning it; the references that are not opted in (with the fix) or point at nothing;
// health as `kubectl argo rollouts get` shows it; the attached revisions a neighbour
// deletes anyway; and the unattached and orphaned revisions of the sweep's plan
// (docs/design.md, "status"). It reads and computes; internal/cli prints.
package inspect

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// Report is the status of one namespace (`status -o json` prints one per namespace).
type Report struct {
	// Cluster names the cluster with --cluster, --all-contexts or --argocd-clusters.
	Cluster   string           `json:"cluster"`
	Namespace string           `json:"namespace"`
	Workloads []WorkloadStatus `json:"workloads"`
	// Unattached are revisions some object references but no referencing ReplicaSet owns.
	Unattached []PlanItem `json:"unattached"`
	// Orphaned are revisions nothing references and nothing live owns.
	Orphaned []PlanItem `json:"orphaned"`
	// OptIn is the fix for the workloads' references that are not opted in.
	OptIn *OptInFix `json:"optInFix,omitempty"`
	// Unprotected are attached revisions a neighbour deletes anyway, with the fix.
	Unprotected []UnprotectedItem `json:"unprotected,omitempty"`
}

// WorkloadStatus is one workload and its ReplicaSets.
type WorkloadStatus struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Via is the workload a Rollout's spec.workloadRef names ("Deployment/name").
	Via         string             `json:"via,omitempty"`
	ReplicaSets []ReplicaSetStatus `json:"replicaSets,omitempty"`
	// Uses lists the revisions a workload without ReplicaSets (StatefulSet, DaemonSet,
	// Job, CronJob, Pod) references.
	Uses []RevisionRef `json:"uses,omitempty"`
	// NotOptedIn are config objects its templates reference that have no opt-in label
	// and are not listed by name: never attached, never collected (Report.OptIn).
	NotOptedIn []ConfigRef `json:"notOptedIn,omitempty"`
	// Health and Message are the workload's as `kubectl argo rollouts get` shows them
	// (a Rollout's status.phase, a Deployment's conditions).
	Health  string `json:"health,omitempty"`
	Message string `json:"message,omitempty"`
	// Dangling are config objects its templates require that do not exist: a Pod of
	// that template cannot start (CreateContainerConfigError).
	Dangling []ConfigRef `json:"dangling,omitempty"`
	// Warnings are about the workload's own settings, such as a Rollout's rollbackWindow
	// reaching past its revisionHistoryLimit (core.RollbackWindowNote).
	Warnings []string `json:"warnings,omitempty"`
}

// ReplicaSetStatus is one ReplicaSet and its revisions.
type ReplicaSetStatus struct {
	Name          string    `json:"name"`
	UID           types.UID `json:"uid"`
	Revision      string    `json:"revision,omitempty"`
	PodHash       string    `json:"podHash,omitempty"`
	Replicas      int32     `json:"replicas"`
	ReadyReplicas int32     `json:"readyReplicas"`
	Created       time.Time `json:"created"`
	// Health is Healthy, Progressing or ScaledDown; Role is stable or canary (Rollouts).
	Health string        `json:"health,omitempty"`
	Role   string        `json:"role,omitempty"`
	Owns   []RevisionRef `json:"owns"`
	// Unattached lists revisions it references but does not own (gc repairs them), and
	// objects owned by name by others that it uses without owning them (ByName: the
	// service attaches them, safety rule 11).
	Unattached []RevisionRef `json:"unattached,omitempty"`
}

// RevisionRef names a revision.
type RevisionRef struct {
	Kind   core.Kind `json:"kind"`
	Name   string    `json:"name"`
	Family string    `json:"family,omitempty"`
	// ByName is set for an object attached by name (an annotation or a command line)
	// without the opt-in label: the garbage collector deletes it with its last owner,
	// the orphan sweep never touches it.
	ByName bool `json:"byName,omitempty"`
}

// PlanItem is one revision of the sweep's plan: what the plan decided, why, and (for
// the gc command) what happened.
type PlanItem struct {
	Kind            core.Kind          `json:"kind"`
	Name            string             `json:"name"`
	UID             types.UID          `json:"uid"`
	ResourceVersion string             `json:"resourceVersion"`
	Family          string             `json:"family"`
	Created         time.Time          `json:"created"`
	AgeSeconds      int64              `json:"ageSeconds"`
	Decision        gc.Decision        `json:"decision"`
	Reason          string             `json:"reason"`
	ReferencedBy    []string           `json:"referencedBy,omitempty"`
	Owners          []string           `json:"owners,omitempty"`
	Rank            int                `json:"rank,omitempty"`
	Repair          []gc.ReplicaSetRef `json:"repair,omitempty"`
	Outcome         gc.Outcome         `json:"outcome,omitempty"`
	Error           string             `json:"error,omitempty"`
}

// NewPlanItem is the plan's item it with its outcome ("" when nothing was done).
func NewPlanItem(it gc.Item, outcome gc.Outcome) PlanItem {
	return PlanItem{Kind: it.Kind, Name: it.Name, UID: it.UID, ResourceVersion: it.ResourceVersion,
		Family: it.Family, Created: it.Created, AgeSeconds: int64(time.Duration(it.Age) / time.Second), Decision: it.Decision,
		Reason: it.Reason, ReferencedBy: it.ReferencedBy, Owners: it.Owners, Rank: it.Rank, Repair: it.Repair, Outcome: outcome}
}

// Config says which cluster and namespaces an Inspector reads.
type Config struct {
	// Cluster names the cluster; "" is the one of --kubeconfig/--context, named
	// dispatch.DefaultClusterName in the reports as the service names it.
	Cluster string
	Clients *kube.Clients
	// Namespaces are the namespaces to read; nil means every namespace holding an
	// opted-in revision.
	Namespaces []string
	// Selector selects the workloads, as the sweep's.
	Selector labels.Selector
	// IncludeSecrets reads Secrets too.
	IncludeSecrets bool
	// Options classify the orphans as the gc command would (a dry run).
	Options gc.Options
}

// Inspector reads the status of one cluster's namespaces.
type Inspector struct {
	cfg     Config
	sweeper *gc.Sweeper
	apps    core.ApplicationReader
}

// New returns an Inspector for cfg; the error is the sweep's, for invalid options.
func New(cfg Config) (*Inspector, error) {
	c := cfg.Clients
	sw, err := gc.NewSweeper(gc.Config{Cluster: cfg.Cluster, DryRun: true, Namespaces: cfg.Namespaces, Selector: cfg.Selector,
		Source:  gc.LiveSource{Client: c.Kube, Dynamic: c.Dynamic, Metadata: c.Metadata, IncludeSecrets: cfg.IncludeSecrets},
		Options: cfg.Options, Clock: c.Clock.Now})
	if err != nil {
		return nil, err
	}
	return &Inspector{cfg: cfg, sweeper: sw, apps: &kube.Applications{Dynamic: c.Dynamic}}, nil
}

// Reports reads every namespace of the Inspector's, in order.
func (in *Inspector) Reports(ctx context.Context) ([]Report, error) {
	list := in.cfg.Namespaces
	if list == nil {
		var err error
		if list, err = (gc.LiveSource{Metadata: in.cfg.Clients.Metadata, IncludeSecrets: in.cfg.IncludeSecrets}).Namespaces(ctx); err != nil {
			return nil, err
		}
	}
	reps := []Report{}
	for _, ns := range list {
		rep, err := in.Namespace(ctx, ns)
		if err != nil {
			return nil, err
		}
		reps = append(reps, rep)
	}
	return reps, nil
}

// Namespace reads the status of namespace ns: the sweep's plan, the other config
// objects for the adoption hints, health, and the revisions an Argo CD Application
// leaves unprotected.
func (in *Inspector) Namespace(ctx context.Context, ns string) (Report, error) {
	plan, snap, err := in.sweeper.Plan(ctx, ns)
	if err != nil {
		return Report{}, err
	}
	rep := Build(snap, plan, listOthers(ctx, in.cfg.Clients.Metadata, ns, in.cfg.IncludeSecrets, plan), in.cfg.IncludeSecrets)
	addHealth(ctx, in.cfg.Clients, ns, &rep)
	addAppUnprotected(ctx, in.apps, &rep, snap.Revisions)
	rep.Cluster = in.cfg.Cluster
	if rep.Cluster == "" {
		rep.Cluster = dispatch.DefaultClusterName
	}
	return rep, nil
}
