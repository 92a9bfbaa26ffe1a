package externalsecrets_test

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/externalsecrets"
)

// A Secret ESO writes after its ReplicaSet exists (the common case: the Rollout and the
// ExternalSecret are applied together, ESO answers later) is attached by the revision
// side; ESO stays its controller, the ReplicaSet is a plain owner, and ESO keeps
// refreshing it without an error.
func TestASecretESOWritesAfterItsReplicaSetIsAttachedAndStaysESOs(t *testing.T) {
	w := newWorld(t, map[string]string{"/web/password": "first"})
	tl := w.watchSecrets()
	rs := w.bareReplicaSet("web-1", "web-secret-5f7c9")
	w.externalSecret("web-secret-5f7c9", "", map[string]string{"password": "/web/password"})
	w.waitSynced("web-secret-5f7c9")
	es, err := w.getExternalSecret("web-secret-5f7c9")
	if err != nil {
		t.Fatal(err)
	}
	s := w.waitOwners("web-secret-5f7c9", rs.UID, es.GetUID())
	if d, ok := tl.attachDelay(s.Name); ok {
		t.Logf("figure: Secret written by ESO -> owned by its ReplicaSet: %s", d)
	}
	for _, o := range s.OwnerReferences {
		isController := o.Controller != nil && *o.Controller
		if (o.UID == es.GetUID()) != isController {
			t.Fatalf("owners %+v: want ExternalSecret %s the only controller", s.OwnerReferences, es.GetName())
		}
	}

	// ESO refreshes the Secret with a new value: the owners stay, ESO reports no error.
	setStoreValue(t, w, "/web/password", "second")
	if err := externalsecrets.Refresh(w.Ctx, w.Dynamic, w.NS, es.GetName()); err != nil {
		t.Fatal(err)
	}
	w.Eventually("ESO writing the new value", func() error {
		got, err := w.secret(s.Name)
		if err != nil {
			return err
		}
		if string(got.Data["password"]) != "second" {
			return fmt.Errorf("password %q", got.Data["password"])
		}
		return nil
	})
	w.waitSynced(es.GetName())
	w.waitOwners(s.Name, rs.UID, es.GetUID())
	if errs := esoErrors(w.NS); len(errs) > 0 {
		t.Fatalf("ESO logged errors for the namespace:\n%s", strings.Join(errs, "\n"))
	}
}

// setStoreValue changes the value the fake SecretStore serves for key.
func setStoreValue(t *testing.T, w *world, key, value string) {
	t.Helper()
	r := w.Dynamic.Resource(externalsecrets.SecretStoreGVR).Namespace(w.NS)
	st, err := r.Get(w.Ctx, storeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data, _, _ := unstructured.NestedSlice(st.Object, "spec", "provider", "fake", "data")
	for _, d := range data {
		if m := d.(map[string]any); m["key"] == key {
			m["value"] = value
		}
	}
	if err := unstructured.SetNestedSlice(st.Object, data, "spec", "provider", "fake", "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Update(w.Ctx, st, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// esoErrors are the lines of ESO's log at level error that name the namespace.
func esoErrors(ns string) []string {
	var out []string
	for _, line := range strings.Split(eso.Log(), "\n") {
		if strings.Contains(line, `"level":"error"`) && strings.Contains(line, ns) {
			out = append(out, line)
		}
	}
	return out
}
