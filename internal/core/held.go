package core

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// collectorOwnerKinds are the owners the service adds (Users.Owners), by group.
var collectorOwnerKinds = map[schema.GroupKind]bool{
	{Group: "apps", Kind: "ReplicaSet"}:         true,
	{Group: "apps", Kind: "ControllerRevision"}: true,
	{Group: "apps", Kind: "StatefulSet"}:        true,
	{Group: "apps", Kind: "DaemonSet"}:          true,
	{Group: "batch", Kind: "Job"}:               true,
	{Group: "batch", Kind: "CronJob"}:           true,
	{Group: "", Kind: "Pod"}:                    true,
}

// CollectorOwner returns the first of refs that puts a config object in the garbage
// collector's hands the way the service does: a non-controller owner of a kind the
// service adds (apps ReplicaSet, ControllerRevision, StatefulSet, DaemonSet; batch Job,
// CronJob; core Pod). ok is false when there is none.
//
// Such an object is deleted by the garbage collector once those owners are gone, so
// every live user of it is made an owner too, whether or not it is opted in or listed
// (safety rule 11, docs/safety.md "Once owned, protected while used"): adding an owner
// to an object that already has one can only keep it longer.
func CollectorOwner(refs []metav1.OwnerReference) (metav1.OwnerReference, bool) {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			continue
		}
		gv, err := schema.ParseGroupVersion(r.APIVersion)
		if err == nil && collectorOwnerKinds[schema.GroupKind{Group: gv.Group, Kind: r.Kind}] {
			return r, true
		}
	}
	return metav1.OwnerReference{}, false
}

// heldReason is the reason an object that is neither opted in nor listed is attached:
// it already has owner o (CollectorOwner).
func heldReason(o metav1.OwnerReference) string {
	return "not opted in or listed, but already owned by " + o.Kind + " " + o.Name +
		": the garbage collector deletes it with its owners, so every live user owns it too (once owned, protected while used)"
}

// heldSkipReason is the reason an object with skip=true is not written although it has
// an owner o (CollectorOwner): the skip is kept, and says what it leaves.
func heldSkipReason(o metav1.OwnerReference) string {
	return "has " + AnnotationSkip + "=true; it is owned by " + o.Kind + " " + o.Name +
		", so the garbage collector deletes it with its owners even while others use it: remove its ownerReferences to keep it"
}
