package core

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Argo CD's resource tracking: which Application manages an object.
const (
	// ArgoCDTrackingID is the annotation of annotation tracking (Argo CD v3's default):
	// "<app>:<group>/<kind>:<namespace>/<name>", <app> being "<namespace>_<name>" for an
	// Application outside Argo CD's own namespace.
	ArgoCDTrackingID = "argocd.argoproj.io/tracking-id"
	// ArgoCDInstanceLabel is the label of label tracking: the Application's name.
	ArgoCDInstanceLabel = "app.kubernetes.io/instance"
)

// ApplicationReader reads an Argo CD Application's spec.syncPolicy.syncOptions;
// namespace "" is Argo CD's own namespace. Optional (it needs read access to
// applications.argoproj.io): without it, or when it answers an error, the app-level
// check is skipped.
type ApplicationReader interface {
	SyncOptions(ctx context.Context, namespace, name string) ([]string, error)
}

// TrackingApp returns the Application that manages an object according to its tracking
// annotation, else its instance label; ok is false when it has neither. namespace "" is
// Argo CD's own namespace.
func TrackingApp(meta *metav1.ObjectMeta) (namespace, name string, ok bool) {
	if id := meta.Annotations[ArgoCDTrackingID]; id != "" {
		app, _, _ := strings.Cut(id, ":")
		if ns, n, found := strings.Cut(app, "_"); found {
			return ns, n, n != ""
		}
		return "", app, app != ""
	}
	if n := meta.Labels[ArgoCDInstanceLabel]; n != "" {
		return "", n, true
	}
	return "", "", false
}

// OwnerProtectionOff returns the first of an Application's sync options that makes Argo
// CD manage (and so prune) objects whatever their non-controller owners, or "". No such
// option is released; the proposals spell it ControllerReferencesOnly=true (argo-cd
// #24814, per object), IgnoreOwnerReferencesOnPrune=true (#26556),
// RespectControllerReferencesOnly=true (gitops-engine #501), RespectOwnerReferencesOnly
// (#12210), and #26669 adds one more whose name is not settled: any option naming owner
// or controller references (or refs) set to true counts.
func OwnerProtectionOff(opts []string) string {
	for _, o := range opts {
		k, v, _ := strings.Cut(strings.TrimSpace(o), "=")
		lk := strings.ToLower(k)
		if strings.EqualFold(strings.TrimSpace(v), "true") &&
			(strings.Contains(lk, "ownerref") || strings.Contains(lk, "controllerref")) {
			return strings.TrimSpace(o)
		}
	}
	return ""
}

// FixAppOwnerProtectionOff is the documented fix of an Application that turns the
// protection off.
const FixAppOwnerProtectionOff = "remove the option from the Application's spec.syncPolicy.syncOptions, or annotate " +
	"the revisions with " + ArgoCDSyncOptions + ": Prune=false (Argo CD then never prunes them; the garbage collector " +
	"still deletes each with its last ReplicaSet)"

// appWarning is the app-level check: the revision's Application (TrackingApp) turns the
// owners' protection off. Nil without an ApplicationReader, for an untracked revision,
// one with Prune=false, or when the Application cannot be read.
func (a *Attacher) appWarning(ctx context.Context, kind Kind, meta *metav1.ObjectMeta) *Warning {
	if a.cfg.Applications == nil || SyncOptions(meta.Annotations[ArgoCDSyncOptions])["Prune"] == "false" {
		return nil
	}
	ns, name, ok := TrackingApp(meta)
	if !ok {
		return nil
	}
	opts, err := a.cfg.Applications.SyncOptions(ctx, ns, name)
	if err != nil {
		a.log.Debug("cannot read the revision's Argo CD Application: app-level check skipped", "application", name, "err", err)
		return nil
	}
	opt := OwnerProtectionOff(opts)
	if opt == "" {
		return nil
	}
	return &Warning{Reason: ReasonNotProtectedFromPruning, Fix: FixAppOwnerProtectionOff,
		Message: fmt.Sprintf("%s %s is not protected from pruning: its Argo CD Application %s syncs with %s, so an Argo CD "+
			"that honours it ignores its ReplicaSet owners and prunes it when Git drops it", kind, meta.Name, name, opt)}
}
