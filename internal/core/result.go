package core

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// Outcome is what happened to one considered object.
type Outcome string

// Outcomes, as reported in Result.Objects.
const (
	// OutcomeAttached: the ownerReference was added by this call.
	OutcomeAttached Outcome = "attached"
	// OutcomeWouldAttach: dry run; a real run would add the ownerReference.
	OutcomeWouldAttach Outcome = "would-attach"
	// OutcomeAlreadyAttached: the ownerReference was already there; nothing written.
	OutcomeAlreadyAttached Outcome = "already-attached"
	// OutcomeSkipped: the object is not eligible (see Reason); nothing written.
	OutcomeSkipped Outcome = "skipped"
	// OutcomeMissing: a required reference names an object that does not exist.
	OutcomeMissing Outcome = "missing"
	// OutcomeMissingOptional: an optional reference names an object that does not exist.
	OutcomeMissingOptional Outcome = "missing-optional"
	// OutcomeError: reading or writing the object failed (see Reason).
	OutcomeError Outcome = "error"
)

// ObjectResult is the outcome for one ConfigMap or Secret.
type ObjectResult struct {
	Kind    Kind    `json:"kind"`
	Name    string  `json:"name"`
	Outcome Outcome `json:"outcome"`
	Reason  string  `json:"reason,omitempty"`
	// From lists where the object was referenced (see Ref.From).
	From []string `json:"from,omitempty"`
	// Owners lists the owners this call added (or, in a dry run, would add), as
	// "Kind/name": the ReplicaSet and the object's other users (docs/safety.md).
	Owners []string `json:"owners,omitempty"`
	// Annotations lists the annotations this call added (or, in a dry run, would add), as
	// "key=value": PruneGuard on a revision a Flux Kustomization applied (docs/safety.md).
	Annotations []string `json:"annotations,omitempty"`
	// Transient is true for an error that a retry may fix; an OutcomeError that is not
	// transient is permanent (see IsPermanent).
	Transient bool `json:"transient,omitempty"`
	// Warnings are the reasons an attached object is still not protected by its owners
	// (Unprotected): a neighbour would delete it anyway. Set when this call attached it.
	Warnings []Warning `json:"warnings,omitempty"`

	cause error // the apiserver's error behind OutcomeError
}

// failed ends o with OutcomeError for err, classified by IsPermanent.
func (o ObjectResult) failed(what string, err error) ObjectResult {
	o.Outcome, o.Reason, o.Transient, o.cause = OutcomeError, what+": "+err.Error(), !IsPermanent(err), err
	return o
}

// WorkloadRef names the workload that controls a ReplicaSet.
type WorkloadRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	// Via names a workload a Rollout's spec.workloadRef points to (kind/name).
	Via string `json:"via,omitempty"`
}

// Result reports everything one Attach (or AttachRevision) call considered.
type Result struct {
	Cluster    string `json:"cluster"`
	Namespace  string `json:"namespace"`
	ReplicaSet string `json:"replicaSet"`
	// Revision is "Kind/name" of the config object an AttachRevision call was for.
	Revision string         `json:"revision,omitempty"`
	UID      types.UID      `json:"uid,omitempty"`
	Workload *WorkloadRef   `json:"workload,omitempty"`
	DryRun   bool           `json:"dryRun,omitempty"`
	Skipped  string         `json:"skipped,omitempty"`
	Objects  []ObjectResult `json:"objects"`
	// Notes are warnings about the workload's settings, such as a Rollout's
	// rollbackWindow reaching past its revisionHistoryLimit (RollbackWindowNote).
	Notes []string `json:"notes,omitempty"`
}

// Counts returns how many objects ended with each outcome.
func (r *Result) Counts() map[Outcome]int {
	c := map[Outcome]int{}
	for _, o := range r.Objects {
		c[o.Outcome]++
	}
	return c
}

// Failed reports whether any object ended with OutcomeError.
func (r *Result) Failed() bool { return r.Counts()[OutcomeError] > 0 }

// Writes is the number of objects this call changed.
func (r *Result) Writes() int { return r.Counts()[OutcomeAttached] }

// Summary is a one-line account, e.g. "ReplicaSet shop/web-7d9: 1 attached, 2 already-attached".
func (r *Result) Summary() string {
	counts := JoinCounts(r.Counts())
	s := fmt.Sprintf("ReplicaSet %s/%s", r.Namespace, r.ReplicaSet)
	if r.Revision != "" {
		kind, name, _ := strings.Cut(r.Revision, "/")
		s = fmt.Sprintf("%s %s/%s", kind, r.Namespace, name)
	}
	if r.Cluster != "" {
		s = r.Cluster + ": " + s
	}
	switch {
	case r.Skipped != "":
		return s + ": skipped (" + r.Skipped + ")"
	case counts == "":
		return s + ": no config objects referenced"
	}
	return s + ": " + counts
}

// JoinCounts formats outcome counts as one line sorted by outcome, e.g.
// "1 attached, 2 already-attached"; zero counts are left out and no counts give "".
func JoinCounts[K ~string](counts map[K]int) string {
	keys := make([]string, 0, len(counts))
	for k, n := range counts {
		if n > 0 {
			keys = append(keys, string(k))
		}
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", counts[K(k)], k))
	}
	return strings.Join(parts, ", ")
}
