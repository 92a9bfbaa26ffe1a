package cache

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// storedMeta is a stored object's lean metadata: its name and namespace as strings
// (the store's key function and the namespace index read them at every insert) and the
// rest as the protobuf encoding of its metav1.ObjectMeta, decoded by the other getters
// (a fresh value each time). It implements metav1.Object, so key functions, indexes and
// the watcher read a stored object as any Kubernetes object. The encoding is never
// written in place: a setter encodes anew, so copies may share it.
type storedMeta struct {
	name, namespace string
	meta            []byte
}

// setObjectMeta stores m (namespace interned).
func (s *storedMeta) setObjectMeta(m *metav1.ObjectMeta) error {
	rest := *m
	rest.Name, rest.Namespace = "", ""
	raw, err := rest.Marshal()
	if err != nil {
		return err
	}
	s.name, s.namespace, s.meta = m.Name, intern(m.Namespace), raw
	return nil
}

// decodeInto decodes the stored metadata into m.
func (s *storedMeta) decodeInto(m *metav1.ObjectMeta) error {
	*m = metav1.ObjectMeta{}
	if err := m.Unmarshal(s.meta); err != nil {
		return err
	}
	m.Name, m.Namespace = s.name, s.namespace
	return nil
}

// objectMeta is the stored metadata, decoded. The encoding is setObjectMeta's own, so it
// decodes; were it ever not to, the getters would see empty metadata.
func (s *storedMeta) objectMeta() *metav1.ObjectMeta {
	m := &metav1.ObjectMeta{}
	_ = s.decodeInto(m)
	return m
}

func (s *storedMeta) update(f func(*metav1.ObjectMeta)) {
	m := s.objectMeta()
	f(m)
	_ = s.setObjectMeta(m)
}

// The metav1.Object methods.

func (s *storedMeta) GetNamespace() string              { return s.namespace }
func (s *storedMeta) SetNamespace(ns string)            { s.namespace = intern(ns) }
func (s *storedMeta) GetName() string                   { return s.name }
func (s *storedMeta) SetName(name string)               { s.name = name }
func (s *storedMeta) GetGenerateName() string           { return s.objectMeta().GenerateName }
func (s *storedMeta) GetUID() types.UID                 { return s.objectMeta().UID }
func (s *storedMeta) GetResourceVersion() string        { return s.objectMeta().ResourceVersion }
func (s *storedMeta) GetGeneration() int64              { return s.objectMeta().Generation }
func (s *storedMeta) GetSelfLink() string               { return s.objectMeta().SelfLink }
func (s *storedMeta) GetCreationTimestamp() metav1.Time { return s.objectMeta().CreationTimestamp }
func (s *storedMeta) GetDeletionTimestamp() *metav1.Time {
	return s.objectMeta().DeletionTimestamp
}
func (s *storedMeta) GetDeletionGracePeriodSeconds() *int64 {
	return s.objectMeta().DeletionGracePeriodSeconds
}
func (s *storedMeta) GetLabels() map[string]string      { return s.objectMeta().Labels }
func (s *storedMeta) GetAnnotations() map[string]string { return s.objectMeta().Annotations }
func (s *storedMeta) GetFinalizers() []string           { return s.objectMeta().Finalizers }
func (s *storedMeta) GetOwnerReferences() []metav1.OwnerReference {
	return s.objectMeta().OwnerReferences
}
func (s *storedMeta) GetManagedFields() []metav1.ManagedFieldsEntry {
	return s.objectMeta().ManagedFields
}

func (s *storedMeta) SetGenerateName(v string) {
	s.update(func(m *metav1.ObjectMeta) { m.GenerateName = v })
}
func (s *storedMeta) SetUID(v types.UID) { s.update(func(m *metav1.ObjectMeta) { m.UID = v }) }
func (s *storedMeta) SetResourceVersion(v string) {
	s.update(func(m *metav1.ObjectMeta) { m.ResourceVersion = v })
}
func (s *storedMeta) SetGeneration(v int64) {
	s.update(func(m *metav1.ObjectMeta) { m.Generation = v })
}
func (s *storedMeta) SetSelfLink(v string) { s.update(func(m *metav1.ObjectMeta) { m.SelfLink = v }) }
func (s *storedMeta) SetCreationTimestamp(v metav1.Time) {
	s.update(func(m *metav1.ObjectMeta) { m.CreationTimestamp = v })
}
func (s *storedMeta) SetDeletionTimestamp(v *metav1.Time) {
	s.update(func(m *metav1.ObjectMeta) { m.DeletionTimestamp = v })
}
func (s *storedMeta) SetDeletionGracePeriodSeconds(v *int64) {
	s.update(func(m *metav1.ObjectMeta) { m.DeletionGracePeriodSeconds = v })
}
func (s *storedMeta) SetLabels(v map[string]string) {
	s.update(func(m *metav1.ObjectMeta) { m.Labels = v })
}
func (s *storedMeta) SetAnnotations(v map[string]string) {
	s.update(func(m *metav1.ObjectMeta) { m.Annotations = v })
}
func (s *storedMeta) SetFinalizers(v []string) {
	s.update(func(m *metav1.ObjectMeta) { m.Finalizers = v })
}
func (s *storedMeta) SetOwnerReferences(v []metav1.OwnerReference) {
	s.update(func(m *metav1.ObjectMeta) { m.OwnerReferences = v })
}
func (s *storedMeta) SetManagedFields(v []metav1.ManagedFieldsEntry) {
	s.update(func(m *metav1.ObjectMeta) { m.ManagedFields = v })
}

var _ metav1.Object = (*storedMeta)(nil)
