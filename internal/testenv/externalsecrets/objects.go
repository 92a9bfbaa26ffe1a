package externalsecrets

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// The resources of the external-secrets.io/v1 API the tests write.
var (
	ExternalSecretGVR = schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1", Resource: "externalsecrets"}
	SecretStoreGVR    = schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1", Resource: "secretstores"}
)

// Store is a SecretStore of the fake provider: it serves Data (key -> value) at
// version "v1" of each key.
func Store(ns, name string, data map[string]string) *unstructured.Unstructured {
	var items []any
	for k, v := range data {
		items = append(items, map[string]any{"key": k, "value": v, "version": "v1"})
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     map[string]any{"provider": map[string]any{"fake": map[string]any{"data": items}}},
	}}
	return u
}

// ExternalSecret describes an ExternalSecret with creationPolicy Owner reading from a
// fake SecretStore.
type ExternalSecret struct {
	Namespace, Name string
	// Store is the SecretStore's name.
	Store string
	// Target is spec.target.name; empty leaves it unset (the Secret takes Name).
	Target string
	// Labels are spec.target.template.metadata.labels (the opt-in label goes here).
	Labels map[string]string
	// Keys maps the Secret's keys to the store's keys.
	Keys map[string]string
}

// Object is e as an external-secrets.io/v1 object.
func (e ExternalSecret) Object() *unstructured.Unstructured {
	var data []any
	for secretKey, remote := range e.Keys {
		data = append(data, map[string]any{"secretKey": secretKey, "remoteRef": map[string]any{"key": remote, "version": "v1"}})
	}
	target := map[string]any{"creationPolicy": "Owner"}
	if e.Target != "" {
		target["name"] = e.Target
	}
	if len(e.Labels) > 0 {
		labels := map[string]any{}
		for k, v := range e.Labels {
			labels[k] = v
		}
		target["template"] = map[string]any{"metadata": map[string]any{"labels": labels}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
		"metadata": map[string]any{"name": e.Name, "namespace": e.Namespace},
		"spec": map[string]any{
			"refreshInterval": "1h",
			"secretStoreRef":  map[string]any{"name": e.Store, "kind": "SecretStore"},
			"target":          target,
			"data":            data,
		},
	}}
}

// Status is what ESO reports about an ExternalSecret.
type Status struct {
	// Ready is the Ready condition's status ("True", "False" or "" before the first
	// reconcile); Reason and Message are its reason and message.
	Ready, Reason, Message string
	// Binding is status.binding.name: the Secret it last wrote.
	Binding string
	// Synced: status.syncedResourceVersion is set (ESO reconciled this spec).
	Synced string
}

// StatusOf reads es's status.
func StatusOf(es *unstructured.Unstructured) Status {
	var st Status
	st.Binding, _, _ = unstructured.NestedString(es.Object, "status", "binding", "name")
	st.Synced, _, _ = unstructured.NestedString(es.Object, "status", "syncedResourceVersion")
	conds, _, _ := unstructured.NestedSlice(es.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" {
			st.Ready, _ = m["status"].(string)
			st.Reason, _ = m["reason"].(string)
			st.Message, _ = m["message"].(string)
		}
	}
	return st
}

// Refresh asks ESO to read the store again now: it changes the force-sync annotation,
// which changes the ExternalSecret's synced version.
func Refresh(ctx context.Context, dc dynamic.Interface, ns, name string) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"force-sync":%q}}}`, time.Now().Format(time.RFC3339Nano))
	_, err := dc.Resource(ExternalSecretGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// SetTarget sets spec.target.name of an ExternalSecret (the "rename the target" pattern).
func SetTarget(ctx context.Context, dc dynamic.Interface, ns, name, target string) error {
	patch := fmt.Sprintf(`{"spec":{"target":{"name":%q}}}`, target)
	_, err := dc.Resource(ExternalSecretGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}
