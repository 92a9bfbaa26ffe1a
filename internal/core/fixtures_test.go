package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/stretchr/testify/require"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/configmap-attacher/configmap-attacher/internal/cache"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

var nsSeq atomic.Int64

// env is one test's namespace on the shared control plane, with admin clients and a
// request counter on the clients the attacher uses.
type env struct {
	t        *testing.T
	ns       string
	kc       kubernetes.Interface // admin, uncounted: fixtures and assertions
	dc       dynamic.Interface
	counter  *kube.RequestCounter
	attacher *core.Attacher
}

func newEnv(t *testing.T) *env {
	t.Helper()
	c := requireCP(t)
	ctx := context.Background()
	e := &env{t: t, counter: &kube.RequestCounter{}}
	e.ns = fmt.Sprintf("t%d-%s", nsSeq.Add(1), strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())))
	if len(e.ns) > 60 {
		e.ns = e.ns[:60]
	}
	e.ns = strings.TrimRight(e.ns, "-")
	admin, err := kube.NewClients(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	e.kc, e.dc = admin.Kube, admin.Dynamic
	if _, err := e.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	counted, err := kube.NewClients(e.counter.Wrap(c.RESTConfig()))
	if err != nil {
		t.Fatal(err)
	}
	e.attacher, err = core.NewAttacher(core.Config{
		Cluster: "local", Client: counted.Kube,
		Reader:       core.LiveReader{Client: counted.Kube, Dynamic: counted.Dynamic, Metadata: counted.Metadata},
		AllowSecrets: true,
		Logger:       testfix.Quiet(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) configMap(name string, labels map[string]string, owners ...metav1.OwnerReference) *corev1.ConfigMap {
	e.t.Helper()
	cm, err := e.kc.CoreV1().ConfigMaps(e.ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, OwnerReferences: owners},
		Data:       map[string]string{"config.yaml": "revision: " + name},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return cm
}

func (e *env) revision(name string) *corev1.ConfigMap {
	return e.configMap(name, map[string]string{core.LabelRevision: "true"})
}

func (e *env) rollout(name string, annotations map[string]string) *unstructured.Unstructured {
	e.t.Helper()
	ro := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Rollout",
		"metadata":   map[string]any{"name": name, "namespace": e.ns},
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": name}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": "app:1"}}},
			},
			"strategy": map[string]any{"canary": map[string]any{}},
		},
	}}
	if annotations != nil {
		ro.SetAnnotations(annotations)
	}
	out, err := e.dc.Resource(core.RolloutGVR).Namespace(e.ns).Create(context.Background(), ro, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func rolloutOwner(ro *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: ro.GetName(), UID: ro.GetUID(),
		Controller: ptr(true), BlockOwnerDeletion: ptr(true)}
}

func ptr[T any](v T) *T { return &v }

// podTemplate references the named ConfigMaps through a volume, envFrom and env.
func podTemplate(app string, configMaps ...string) corev1.PodTemplateSpec {
	spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}
	for i, cm := range configMaps {
		switch i % 3 {
		case 0:
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: fmt.Sprintf("v%d", i), VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}})
		case 1:
			spec.Containers[0].EnvFrom = append(spec.Containers[0].EnvFrom, corev1.EnvFromSource{
				ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}})
		default:
			spec.Containers[0].Env = append(spec.Containers[0].Env, corev1.EnvVar{Name: fmt.Sprintf("E%d", i), ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: cm}, Key: "k"}}})
		}
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}}, Spec: spec}
}

// replicaSet creates a ReplicaSet with zero replicas (no pods needed) and the given
// controller owner.
func (e *env) replicaSet(name string, owner *metav1.OwnerReference, tmpl corev1.PodTemplateSpec, mutate ...func(*appsv1.ReplicaSet)) *appsv1.ReplicaSet {
	e.t.Helper()
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: tmpl.Labels},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels},
			Template: tmpl,
		},
	}
	if owner != nil {
		rs.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	for _, m := range mutate {
		m(rs)
	}
	out, err := e.kc.AppsV1().ReplicaSets(e.ns).Create(context.Background(), rs, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

func (e *env) event(rs *appsv1.ReplicaSet, opts core.Options) core.Event {
	return core.Event{Namespace: e.ns, Name: rs.Name, UID: rs.UID, Options: opts}
}

func (e *env) owners(kind core.Kind, name string) []metav1.OwnerReference {
	e.t.Helper()
	var meta metav1.ObjectMeta
	if kind == core.KindSecret {
		s, err := e.kc.CoreV1().Secrets(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		meta = s.ObjectMeta
	} else {
		cm, err := e.kc.CoreV1().ConfigMaps(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		meta = cm.ObjectMeta
	}
	return meta.OwnerReferences
}

func ownerUIDs(refs []metav1.OwnerReference) []types.UID {
	out := make([]types.UID, 0, len(refs))
	for _, r := range refs {
		out = append(out, r.UID)
	}
	return out
}

func outcomes(res core.Result) map[string]core.Outcome {
	m := map[string]core.Outcome{}
	for _, o := range res.Objects {
		m[string(o.Kind)+"/"+o.Name] = o.Outcome
	}
	return m
}

// mapReader is a core.Reader over fixed objects, for unit tests of the core's logic.
type mapReader struct {
	rs   map[string]*appsv1.ReplicaSet
	meta map[string]*metav1.PartialObjectMetadata // "Kind/name"
}

func (m mapReader) ReplicaSet(_ context.Context, _, name string) (*appsv1.ReplicaSet, error) {
	if rs, ok := m.rs[name]; ok {
		return rs, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "replicasets"}, name)
}

func (m mapReader) Deployment(_ context.Context, _, name string) (*appsv1.Deployment, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "apps", Resource: "deployments"}, name)
}

func (m mapReader) Rollout(_ context.Context, _, name string) (*unstructured.Unstructured, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: core.RolloutGroup, Resource: core.RolloutResource}, name)
}

func (m mapReader) Users(context.Context, core.Kind, string, string) (*core.Users, error) {
	return &core.Users{}, nil
}

func (m mapReader) ObjectMeta(_ context.Context, kind core.Kind, _, name string) (*metav1.PartialObjectMetadata, error) {
	if o, ok := m.meta[string(kind)+"/"+name]; ok {
		return o, nil
	}
	return nil, apierrors.NewNotFound(kind.GVR().GroupResource(), name)
}

func unwrapAll(err error) []error {
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		return u.Unwrap()
	}
	return []error{err}
}

func resultFor(res core.Result, kind core.Kind, name string) core.ObjectResult {
	for _, o := range res.Objects {
		if o.Kind == kind && o.Name == name {
			return o
		}
	}
	return core.ObjectResult{}
}

// unitAttacher builds an Attacher over a fake clientset whose patches of the named
// ConfigMaps fail with fail[name], and an event for a ReplicaSet using every name.
func unitAttacher(t *testing.T, fail map[string]error, names ...string) (*core.Attacher, core.Event) {
	t.Helper()
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-1", UID: "rs-uid"},
		Spec: appsv1.ReplicaSetSpec{Template: podTemplate("web", names...)}}
	r := mapReader{rs: map[string]*appsv1.ReplicaSet{rs.Name: rs}, meta: map[string]*metav1.PartialObjectMetadata{}}
	objs := []runtime.Object{rs}
	for i, n := range names {
		om := metav1.ObjectMeta{Namespace: "shop", Name: n, UID: types.UID("cm-" + n), ResourceVersion: fmt.Sprint(i + 1),
			Labels: map[string]string{core.LabelRevision: "true"}}
		r.meta["ConfigMap/"+n] = &metav1.PartialObjectMetadata{ObjectMeta: om}
		objs = append(objs, &corev1.ConfigMap{ObjectMeta: om})
	}
	kc := fake.NewClientset(objs...)
	kc.PrependReactor("patch", "configmaps", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if err, ok := fail[action.(k8stesting.PatchAction).GetName()]; ok {
			return true, nil, err
		}
		return true, &corev1.ConfigMap{}, nil
	})
	a, err := core.NewAttacher(core.Config{Cluster: "unit", Client: kc, Reader: r, Logger: testfix.Quiet()})
	require.NoError(t, err)
	return a, core.Event{Namespace: "shop", Name: rs.Name, UID: rs.UID, Options: core.DefaultOptions()}
}

// restrictedAttacher returns an Attacher that authenticates as a new ServiceAccount sa
// of e.ns holding exactly rules (a Role in e.ns), with a token from the TokenRequest
// API, as a pod would. It waits until the Role is in effect.
func (e *env) restrictedAttacher(sa string, rules []rbacv1.PolicyRule) *core.Attacher {
	e.t.Helper()
	return e.restrictedAttacherWith(sa, rules, core.Config{})
}

// restrictedAttacherWith is restrictedAttacher with cfg's BlockOwnerDeletion.
func (e *env) restrictedAttacherWith(sa string, rules []rbacv1.PolicyRule, cfg core.Config) *core.Attacher {
	e.t.Helper()
	ctx := context.Background()
	cp := requireCP(e.t)
	_, err := e.kc.CoreV1().ServiceAccounts(e.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	_, err = e.kc.RbacV1().Roles(e.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa}, Rules: rules}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	_, err = e.kc.RbacV1().RoleBindings(e.ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: e.ns}}}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	tr, err := e.kc.CoreV1().ServiceAccounts(e.ns).CreateToken(ctx, sa, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	clients, err := kube.NewClients(cp.TokenConfig(tr.Status.Token))
	require.NoError(e.t, err)
	controlplane.Eventually(e.t, 30*time.Second, "the Role to be in effect", func() error {
		for _, r := range rules {
			ssar, err := clients.Kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
				Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{
					Namespace: e.ns, Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0]}}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			if !ssar.Status.Allowed {
				return fmt.Errorf("%s %s not allowed yet", r.Verbs[0], r.Resources[0])
			}
		}
		return nil
	})
	a, err := core.NewAttacher(core.Config{Cluster: "local", Client: clients.Kube,
		Reader:             core.LiveReader{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata},
		BlockOwnerDeletion: cfg.BlockOwnerDeletion, Logger: testfix.Quiet()})
	require.NoError(e.t, err)
	return a
}

// user creates a workload or bare Pod of kind ("StatefulSet", "DaemonSet", "Job",
// "CronJob", "Pod") running tmpl, and for a StatefulSet or DaemonSet waits until its
// controller has written the ControllerRevision of tmpl. It returns the object.
func (e *env) user(kind, name string, tmpl corev1.PodTemplateSpec) metav1.Object {
	e.t.Helper()
	ctx := context.Background()
	sel := &metav1.LabelSelector{MatchLabels: tmpl.Labels}
	apps, batch := e.kc.AppsV1(), e.kc.BatchV1()
	var obj metav1.Object
	var err error
	switch kind {
	case "StatefulSet":
		obj, err = apps.StatefulSets(e.ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr(int32(1)), ServiceName: name, Selector: sel, Template: tmpl}}, metav1.CreateOptions{})
	case "DaemonSet":
		obj, err = apps.DaemonSets(e.ns).Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tmpl}}, metav1.CreateOptions{})
	case "Job":
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		obj, err = batch.Jobs(e.ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: batchv1.JobSpec{Template: tmpl}}, metav1.CreateOptions{})
	case "CronJob":
		tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		obj, err = batch.CronJobs(e.ns).Create(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}}, metav1.CreateOptions{})
	case "Pod":
		e.waitDefaultServiceAccount()
		om := tmpl.ObjectMeta
		om.Name = name
		obj, err = e.kc.CoreV1().Pods(e.ns).Create(ctx, &corev1.Pod{ObjectMeta: om, Spec: tmpl.Spec}, metav1.CreateOptions{})
	default:
		e.t.Fatalf("unknown kind %q", kind)
	}
	require.NoError(e.t, err)
	if kind == "StatefulSet" || kind == "DaemonSet" {
		e.revisionsOf(obj.GetUID(), 1)
	}
	return obj
}

// revisionsOf waits until n ControllerRevisions controlled by owner exist and returns them.
func (e *env) revisionsOf(owner types.UID, n int) []appsv1.ControllerRevision {
	e.t.Helper()
	var out []appsv1.ControllerRevision
	controlplane.Eventually(e.t, 60*time.Second, "the controller's ControllerRevisions", func() error {
		l, err := e.kc.AppsV1().ControllerRevisions(e.ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		out = out[:0]
		for _, cr := range l.Items {
			if c := metav1.GetControllerOf(&cr); c != nil && c.UID == owner {
				out = append(out, cr)
			}
		}
		if len(out) != n {
			return fmt.Errorf("%d of %d", len(out), n)
		}
		return nil
	})
	return out
}

func (e *env) waitDefaultServiceAccount() {
	e.t.Helper()
	controlplane.Eventually(e.t, 30*time.Second, "the default ServiceAccount", func() error {
		_, err := e.kc.CoreV1().ServiceAccounts(e.ns).Get(context.Background(), "default", metav1.GetOptions{})
		return err
	})
}

// deleteUser deletes a user created by e.user, letting the garbage collector delete
// what it owns (background propagation).
func (e *env) deleteUser(kind, name string) {
	e.t.Helper()
	ctx, bg := context.Background(), metav1.DeletePropagationBackground
	o := metav1.DeleteOptions{PropagationPolicy: &bg}
	apps, batch := e.kc.AppsV1(), e.kc.BatchV1()
	var err error
	switch kind {
	case "ReplicaSet":
		err = apps.ReplicaSets(e.ns).Delete(ctx, name, o)
	case "StatefulSet":
		err = apps.StatefulSets(e.ns).Delete(ctx, name, o)
	case "DaemonSet":
		err = apps.DaemonSets(e.ns).Delete(ctx, name, o)
	case "Job":
		err = batch.Jobs(e.ns).Delete(ctx, name, o)
	case "CronJob":
		err = batch.CronJobs(e.ns).Delete(ctx, name, o)
	case "Pod":
		err = e.kc.CoreV1().Pods(e.ns).Delete(ctx, name, o)
	}
	require.NoError(e.t, err)
}

// waitConfigMapGone waits until the garbage collector has deleted the ConfigMap.
func (e *env) waitConfigMapGone(name string) {
	e.t.Helper()
	e.waitGone("ConfigMap "+name, func(ctx context.Context) error {
		_, err := e.kc.CoreV1().ConfigMaps(e.ns).Get(ctx, name, metav1.GetOptions{})
		return err
	})
}

// waitSecretGone waits until the garbage collector has deleted the Secret.
func (e *env) waitSecretGone(name string) {
	e.t.Helper()
	e.waitGone("Secret "+name, func(ctx context.Context) error {
		_, err := e.kc.CoreV1().Secrets(e.ns).Get(ctx, name, metav1.GetOptions{})
		return err
	})
}

// waitReplicaSetGone waits until the ReplicaSet is deleted (finalizers done).
func (e *env) waitReplicaSetGone(name string) {
	e.t.Helper()
	e.waitGone("ReplicaSet "+name, func(ctx context.Context) error {
		_, err := e.kc.AppsV1().ReplicaSets(e.ns).Get(ctx, name, metav1.GetOptions{})
		return err
	})
}

// waitGone waits until get answers NotFound.
func (e *env) waitGone(what string, get func(context.Context) error) {
	e.t.Helper()
	controlplane.Eventually(e.t, 60*time.Second, what+" to be deleted", func() error {
		err := get(context.Background())
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (err %v)", err)
	})
}

// waitOwnerDropped waits until the garbage collector has removed the deleted owner uid
// from the ConfigMap's ownerReferences (it does so when other owners are live), which
// proves it has processed the owner's deletion and kept the ConfigMap.
func (e *env) waitOwnerDropped(name string, uid types.UID) {
	e.t.Helper()
	controlplane.Eventually(e.t, 60*time.Second, "the garbage collector to drop the deleted owner of "+name, func() error {
		cm, err := e.kc.CoreV1().ConfigMaps(e.ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			e.t.Fatalf("the garbage collector deleted %s, which another user still needs", name)
		}
		if err != nil {
			return err
		}
		if hasOwnerUID(cm.OwnerReferences, uid) {
			return errors.New("the deleted owner is still listed")
		}
		return nil
	})
}

func hasOwnerUID(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, r := range refs {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// cachedAttacher returns an Attacher reading from a running informer cache
// (internal/cache) of e.ns, synced, with writes through the counted clients.
func (e *env) cachedAttacher() *core.Attacher {
	e.t.Helper()
	a, _ := e.cachedAttacherWith(cache.Options{})
	return a
}

// cachedAttacherWith is cachedAttacher with opts for the cache (its namespace, Rollout
// poll and logger are e's), and the cache.
func (e *env) cachedAttacherWith(opts cache.Options) (*core.Attacher, *cache.Cache) {
	e.t.Helper()
	cp := requireCP(e.t)
	clients, err := kube.NewClients(e.counter.Wrap(cp.RESTConfig()))
	require.NoError(e.t, err)
	opts.Namespace, opts.RolloutPoll, opts.Logger = e.ns, 100*time.Millisecond, testfix.Quiet()
	c, err := cache.New(clients, opts)
	require.NoError(e.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	e.t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	require.NoError(e.t, c.WaitForSync(wctx))
	controlplane.Eventually(e.t, 10*time.Second, "the Rollout informer", func() error {
		if !c.HasSynced() {
			return errors.New("not synced")
		}
		return nil
	})
	// The user informers start with the first read that needs them (docs/design.md,
	// "Per-cluster cost"): started here (Workloads waits for them), so the requests a test
	// counts are its attach's own.
	_, _ = c.Workloads(wctx, e.ns)
	a, err := core.NewAttacher(core.Config{Cluster: "local", Client: clients.Kube, Reader: c, Logger: testfix.Quiet()})
	require.NoError(e.t, err)
	return a, c
}
