package cache

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// The stored form (docs/design.md, "The cache representation"): the typed informers
// hold a record per workload and the config informers a metaRecord per ConfigMap or
// Secret, never a Kubernetes struct. A record keeps the lean metadata as a
// metav1.ObjectMeta (key functions, the namespace index and the watcher read it through
// metav1.Object) and the rest of the lean object as its protobuf encoding, decoded into
// a fresh object on every read: a reader always gets its own copy.

// recordKind says which Kubernetes type a record's body encodes.
type recordKind uint8

const (
	kindReplicaSet recordKind = iota
	kindDeployment
	kindControllerRevision
	kindStatefulSet
	kindDaemonSet
	kindJob
	kindCronJob
	kindPod
)

// protoObject is a k8s.io/api type: a Kubernetes object with its protobuf encoding.
type protoObject interface {
	runtime.Object
	metav1.ObjectMetaAccessor
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// newOfKind builds the empty object of each kind, for decoding.
var newOfKind = [...]func() protoObject{
	kindReplicaSet:         func() protoObject { return &appsv1.ReplicaSet{} },
	kindDeployment:         func() protoObject { return &appsv1.Deployment{} },
	kindControllerRevision: func() protoObject { return &appsv1.ControllerRevision{} },
	kindStatefulSet:        func() protoObject { return &appsv1.StatefulSet{} },
	kindDaemonSet:          func() protoObject { return &appsv1.DaemonSet{} },
	kindJob:                func() protoObject { return &batchv1.Job{} },
	kindCronJob:            func() protoObject { return &batchv1.CronJob{} },
	kindPod:                func() protoObject { return &corev1.Pod{} },
}

func kindOf(obj any) (recordKind, bool) {
	switch obj.(type) {
	case *appsv1.ReplicaSet:
		return kindReplicaSet, true
	case *appsv1.Deployment:
		return kindDeployment, true
	case *appsv1.ControllerRevision:
		return kindControllerRevision, true
	case *appsv1.StatefulSet:
		return kindStatefulSet, true
	case *appsv1.DaemonSet:
		return kindDaemonSet, true
	case *batchv1.Job:
		return kindJob, true
	case *batchv1.CronJob:
		return kindCronJob, true
	case *corev1.Pod:
		return kindPod, true
	}
	return 0, false
}

// record is a workload as the typed informers store it: the lean metadata, the lean
// object's protobuf encoding without its metadata, and the uses and listed index keys
// computed once, when it was stored.
type record struct {
	metav1.ObjectMeta
	kind   recordKind
	body   []byte
	uses   []unique.Handle[string] // core.UsesKeys
	listed []unique.Handle[string] // core.ListedKeys
}

// errNotRecord is returned by decode for a value that is not a stored record.
var errNotRecord = errors.New("cache: not a stored record")

// toRecord is the typed informers' transform: Lean, then the record of the lean object.
// A value of a kind without a record (a tombstone, say) is returned as Lean returns it.
func toRecord(obj any) (any, error) {
	if r, ok := obj.(*record); ok {
		return r, nil
	}
	lean, err := Lean(obj)
	if err != nil {
		return nil, err
	}
	kind, ok := kindOf(lean)
	if !ok {
		return lean, nil
	}
	o := lean.(protoObject)
	r := &record{kind: kind, uses: handles(core.UsesKeys(o)), listed: handles(core.ListedKeys(o))}
	m := o.GetObjectMeta().(*metav1.ObjectMeta)
	r.ObjectMeta = *m
	internMeta(&r.ObjectMeta)
	*m = metav1.ObjectMeta{}
	if r.body, err = o.Marshal(); err != nil {
		return nil, fmt.Errorf("cache: encoding %s/%s: %w", r.Namespace, r.Name, err)
	}
	return r, nil
}

// object decodes the record into a fresh Kubernetes object (its metadata a deep copy).
func (r *record) object() (protoObject, error) {
	o := newOfKind[r.kind]()
	if err := o.Unmarshal(r.body); err != nil {
		return nil, fmt.Errorf("cache: decoding %s/%s: %w", r.Namespace, r.Name, err)
	}
	r.ObjectMeta.DeepCopyInto(o.GetObjectMeta().(*metav1.ObjectMeta))
	return o, nil
}

// GetObjectKind implements runtime.Object (a record carries no type metadata).
func (r *record) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object; the body and keys are never written, so
// the copy shares them.
func (r *record) DeepCopyObject() runtime.Object {
	out := *r
	r.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// metaRecord is a ConfigMap's or Secret's metadata as the config informers store it:
// the lean metadata without its labels, which are kept as interned key, value pairs
// (a revision's labels repeat across thousands of objects), and the type metadata.
type metaRecord struct {
	metav1.ObjectMeta
	typ    unique.Handle[metav1.TypeMeta]
	labels []unique.Handle[string] // key, value, key, value, ... (nil: no labels map)
}

// toMetaRecord is the config informers' transform: leanConfigMeta, then its metaRecord.
func toMetaRecord(obj any) (any, error) {
	if r, ok := obj.(*metaRecord); ok {
		return r, nil
	}
	lean, err := leanConfigMeta(obj)
	if err != nil {
		return nil, err
	}
	m, ok := lean.(*metav1.PartialObjectMetadata)
	if !ok {
		return lean, nil
	}
	r := &metaRecord{ObjectMeta: m.ObjectMeta, typ: unique.Make(m.TypeMeta)}
	r.Labels = nil
	if m.Labels != nil {
		r.labels = make([]unique.Handle[string], 0, 2*len(m.Labels))
		for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
			r.labels = append(r.labels, unique.Make(k), unique.Make(m.Labels[k]))
		}
	}
	internMeta(&r.ObjectMeta)
	return r, nil
}

// GetLabels implements metav1.Object with a fresh map of the labels.
func (r *metaRecord) GetLabels() map[string]string {
	if r.labels == nil {
		return nil
	}
	out := make(map[string]string, len(r.labels)/2)
	for i := 0; i+1 < len(r.labels); i += 2 {
		out[r.labels[i].Value()] = r.labels[i+1].Value()
	}
	return out
}

// label returns the value of the label key.
func (r *metaRecord) label(key string) (string, bool) {
	for i := 0; i+1 < len(r.labels); i += 2 {
		if r.labels[i].Value() == key {
			return r.labels[i+1].Value(), true
		}
	}
	return "", false
}

// partial returns the stored metadata as a fresh PartialObjectMetadata.
func (r *metaRecord) partial() *metav1.PartialObjectMetadata {
	out := &metav1.PartialObjectMetadata{TypeMeta: r.typ.Value()}
	r.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Labels = r.GetLabels()
	return out
}

// GetObjectKind implements runtime.Object.
func (r *metaRecord) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object; the label handles are never written.
func (r *metaRecord) DeepCopyObject() runtime.Object {
	out := *r
	r.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// Decode returns the Kubernetes object a stored value of the cache's informers holds:
// the *appsv1.ReplicaSet (etc.) of a workload, the *metav1.PartialObjectMetadata of a
// config object, a fresh copy each time. Any other value is returned as it is (a Rollout,
// an object built elsewhere).
func Decode(obj any) (any, error) {
	switch r := obj.(type) {
	case *record:
		return r.object()
	case *metaRecord:
		return r.partial(), nil
	}
	return obj, nil
}

func handles(keys []string) []unique.Handle[string] {
	if len(keys) == 0 {
		return nil
	}
	out := make([]unique.Handle[string], len(keys))
	for i, k := range keys {
		out[i] = unique.Make(k)
	}
	return out
}

func values(hs []unique.Handle[string]) []string {
	if len(hs) == 0 {
		return nil
	}
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Value()
	}
	return out
}

// interned holds one copy of the strings that repeat across objects and whose set is
// small: namespaces and owner API versions and kinds.
var interned sync.Map // string -> string

func intern(s string) string {
	if s == "" {
		return s
	}
	if v, ok := interned.Load(s); ok {
		return v.(string)
	}
	v, _ := interned.LoadOrStore(s, s)
	return v.(string)
}

// internMeta interns m's namespace and owners' API versions and kinds, in a copy of its
// ownerReferences (m may share them with the object it was reduced from).
func internMeta(m *metav1.ObjectMeta) {
	m.Namespace = intern(m.Namespace)
	m.OwnerReferences = slices.Clone(m.OwnerReferences)
	for i := range m.OwnerReferences {
		m.OwnerReferences[i].APIVersion = intern(m.OwnerReferences[i].APIVersion)
		m.OwnerReferences[i].Kind = intern(m.OwnerReferences[i].Kind)
	}
}
