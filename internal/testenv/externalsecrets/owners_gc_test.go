package externalsecrets_test

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// An ESO-managed Secret revision has two kinds of owners: its ExternalSecret (the
// controller) and the ReplicaSets that use it. The garbage collector deletes it only
// once every owner is gone, in either order; with one owner left it drops the reference
// to the gone one and keeps the Secret. Nothing deletes it earlier.
func TestAnESOSecretGoesWithTheLastOfItsOwnersInEitherOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		// externalSecretFirst: the ExternalSecret is deleted first (Git dropped it and
		// Argo CD pruned it), then the ReplicaSet; otherwise the other way round.
		externalSecretFirst bool
	}{
		{"the ExternalSecret pruned first: the ReplicaSet keeps the Secret, which goes with it", true},
		{"the ReplicaSet gone first: the Secret stays while its ExternalSecret exists, and goes with it", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, map[string]string{"/web/password": "p"})
			const name = "web-secret-9e1d"
			rs := w.bareReplicaSet("web-1", name)
			w.externalSecret(name, "", map[string]string{"password": "/web/password"})
			w.waitSynced(name)
			es, err := w.getExternalSecret(name)
			if err != nil {
				t.Fatal(err)
			}
			w.waitOwners(name, rs.UID, es.GetUID())

			first, second := es.GetUID(), rs.UID
			deleteFirst, deleteSecond := func() { w.deleteExternalSecret(name) }, func() { w.deleteReplicaSet(rs.Name) }
			if !tc.externalSecretFirst {
				first, second = second, first
				deleteFirst, deleteSecond = deleteSecond, deleteFirst
			}
			deleteFirst()
			// The garbage collector's answer: the Secret kept, owned by the survivor alone.
			w.Eventually("the garbage collector dropping the gone owner and keeping the Secret", func() error {
				s, err := w.secret(name)
				if err != nil {
					return fmt.Errorf("the Secret must survive its first owner: %w", err)
				}
				if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != second {
					return fmt.Errorf("owners %v, want only %s (gone: %s)", s.OwnerReferences, second, first)
				}
				return nil
			})
			if errs := esoErrors(w.NS); len(errs) > 0 {
				t.Fatalf("ESO logged errors: %v", errs)
			}
			deleteSecond()
			w.WaitGone("Secret "+name, func() error { _, err := w.secret(name); return err })
		})
	}
}

// bareReplicaSet creates a ReplicaSet (no workload above it) whose Pods read secret.
func (w *world) bareReplicaSet(name, secret string) *appsv1.ReplicaSet {
	w.T.Helper()
	one := int32(1)
	tmpl := podTemplate(name, secret)
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.ReplicaSetSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl}}
	created, err := w.Kube.AppsV1().ReplicaSets(w.NS).Create(w.Ctx, rs, metav1.CreateOptions{})
	if err != nil {
		w.T.Fatalf("create ReplicaSet %s: %v", name, err)
	}
	return created
}

func (w *world) deleteReplicaSet(name string) {
	w.T.Helper()
	bg := metav1.DeletePropagationBackground
	if err := w.Kube.AppsV1().ReplicaSets(w.NS).Delete(w.Ctx, name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		w.T.Fatalf("delete ReplicaSet %s: %v", name, err)
	}
}

// ownersAre reports whether s is owned by exactly uids.
func ownersAre(s *corev1.Secret, uids ...types.UID) error {
	if len(s.OwnerReferences) != len(uids) {
		return fmt.Errorf("owners %v, want %v", s.OwnerReferences, uids)
	}
	for _, uid := range uids {
		found := false
		for _, o := range s.OwnerReferences {
			found = found || o.UID == uid
		}
		if !found {
			return fmt.Errorf("owners %v, want %v", s.OwnerReferences, uids)
		}
	}
	return nil
}
