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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// The stored form (docs/design.md, "The cache representation"): the typed informers
// hold a record per workload and the config informers a metaRecord per ConfigMap or
// Secret, never a Kubernetes struct. A record keeps the lean metadata as a storedMeta
// (name and namespace, the rest protobuf; key functions, the namespace index and the
// watcher read it through metav1.Object) and the rest of the lean object as its protobuf
// encoding, decoded into a fresh object on every read: a reader always gets its own copy.

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
	storedMeta
	body  []byte
	keys  []unique.Handle[string] // core.UsesKeys, then core.ListedKeys
	nUses uint32                  // how many of keys are uses keys
	kind  recordKind
}

func (r *record) uses() []string   { return values(r.keys[:r.nUses]) }
func (r *record) listed() []string { return values(r.keys[r.nUses:]) }

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
	m := o.GetObjectMeta().(*metav1.ObjectMeta)
	keys, nUses := indexKeys(o, m.Namespace)
	r := &record{kind: kind, keys: keys, nUses: nUses}
	if err := r.setObjectMeta(m); err != nil {
		return nil, fmt.Errorf("cache: encoding %s/%s: %w", m.Namespace, m.Name, err)
	}
	*m = metav1.ObjectMeta{}
	if r.body, err = o.Marshal(); err != nil {
		return nil, fmt.Errorf("cache: encoding %s/%s: %w", r.namespace, r.name, err)
	}
	return r, nil
}

// indexKeys returns core.UsesKeys of o followed by core.ListedKeys (from one
// core.ObjectRefs), and how many are uses keys.
func indexKeys(o any, namespace string) ([]unique.Handle[string], uint32) {
	refs := core.ObjectRefs(o)
	if len(refs) == 0 {
		return nil, 0
	}
	keys := make([]unique.Handle[string], 0, len(refs))
	for _, r := range refs {
		keys = append(keys, unique.Make(core.UsesKey(r.Kind, namespace, r.Name)))
	}
	for _, r := range refs {
		if r.Explicit {
			keys = append(keys, unique.Make(core.UsesKey(r.Kind, namespace, r.Name)))
		}
	}
	return keys, uint32(len(refs))
}

// object decodes the record into a fresh Kubernetes object.
func (r *record) object() (protoObject, error) {
	o := newOfKind[r.kind]()
	if err := o.Unmarshal(r.body); err != nil {
		return nil, fmt.Errorf("cache: decoding %s/%s: %w", r.namespace, r.name, err)
	}
	if err := r.decodeInto(o.GetObjectMeta().(*metav1.ObjectMeta)); err != nil {
		return nil, fmt.Errorf("cache: decoding the metadata of %s/%s: %w", r.namespace, r.name, err)
	}
	return o, nil
}

// GetObjectKind implements runtime.Object (a record carries no type metadata).
func (r *record) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object; the encodings and keys are never written in
// place, so the copy shares them.
func (r *record) DeepCopyObject() runtime.Object {
	out := *r
	return &out
}

// metaRecord is a ConfigMap's or Secret's metadata as the config informers store it:
// the lean metadata without its labels, which are kept as interned key, value pairs
// (a revision's labels repeat across thousands of objects), and the type metadata.
type metaRecord struct {
	storedMeta
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
	r := &metaRecord{typ: unique.Make(m.TypeMeta)}
	r.SetLabels(m.Labels)
	rest := m.ObjectMeta
	rest.Labels = nil
	if err := r.setObjectMeta(&rest); err != nil {
		return nil, fmt.Errorf("cache: encoding %s/%s: %w", m.Namespace, m.Name, err)
	}
	return r, nil
}

// SetLabels implements metav1.Object.
func (r *metaRecord) SetLabels(labels map[string]string) {
	r.labels = nil
	if labels != nil {
		r.labels = make([]unique.Handle[string], 0, 2*len(labels))
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			r.labels = append(r.labels, unique.Make(k), unique.Make(labels[k]))
		}
	}
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
	out := &metav1.PartialObjectMetadata{TypeMeta: r.typ.Value(), ObjectMeta: *r.objectMeta()}
	out.Labels = r.GetLabels()
	return out
}

// GetObjectKind implements runtime.Object.
func (r *metaRecord) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object; the encoding and label handles are never
// written in place.
func (r *metaRecord) DeepCopyObject() runtime.Object {
	out := *r
	return &out
}

// Decode returns the Kubernetes object a stored value of the cache's informers holds:
// the *appsv1.ReplicaSet (etc.) of a workload, the *metav1.PartialObjectMetadata of a
// config object, a fresh copy each time; a Rollout (stored as lean unstructured data) is
// deep-copied, so it is the reader's own too. Any other value is returned as it is (an
// object built elsewhere).
func Decode(obj any) (any, error) {
	switch r := obj.(type) {
	case *record:
		return r.object()
	case *metaRecord:
		return r.partial(), nil
	case *unstructured.Unstructured:
		return r.DeepCopy(), nil
	}
	return obj, nil
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

// interned holds one copy of each namespace name (they repeat across objects, and there
// are few).
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
