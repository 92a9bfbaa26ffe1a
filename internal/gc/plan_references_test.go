package gc_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
)

var brkNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// planOne plans a namespace holding one old, unowned, opted-in revision of kind k named
// "rev-1" and the given workloads, with MinAge 0 and Keep 0: only a reference can keep it.
func planOne(t *testing.T, k core.Kind, ws ...gc.Workload) gc.Item {
	t.Helper()
	s := &gc.Snapshot{Namespace: "shop", Listed: map[schema.GroupKind]bool{}, Live: map[types.UID]bool{}}
	for _, gk := range []schema.GroupKind{{Group: "apps", Kind: "ReplicaSet"}, {Group: "apps", Kind: "Deployment"},
		{Group: "apps", Kind: "StatefulSet"}, {Group: "apps", Kind: "DaemonSet"}, {Group: "batch", Kind: "Job"},
		{Group: "batch", Kind: "CronJob"}, {Group: "", Kind: "Pod"}, {Group: "argoproj.io", Kind: "Rollout"},
		{Group: "apps", Kind: "ControllerRevision"}} {
		s.Listed[gk] = true
	}
	for _, w := range ws {
		s.Workloads = append(s.Workloads, w)
		s.Live[w.UID] = true
	}
	s.Revisions = []gc.Revision{{Kind: k, Name: "rev-1", UID: "rev-uid", ResourceVersion: "7",
		Created: brkNow.Add(-48 * time.Hour), Labels: map[string]string{core.LabelRevision: "true"}}}
	p, err := gc.PlanNamespace(s, gc.Options{MinAge: 0, Keep: 0, Now: brkNow})
	require.NoError(t, err)
	require.Len(t, p.Items, 1)
	return p.Items[0]
}

func podWith(mut func(*corev1.PodSpec)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop", UID: "pod-uid"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	mut(&p.Spec)
	return p
}

var isController = true

// revisionWith is a StatefulSet's ControllerRevision whose data holds spec as its template.
func revisionWith(t *testing.T, spec corev1.PodSpec) *appsv1.ControllerRevision {
	t.Helper()
	raw, err := core.EncodeRevisionTemplate(&corev1.PodTemplateSpec{Spec: spec})
	require.NoError(t, err)
	return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: "db-5d8f", Namespace: "shop", UID: "cr-uid",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "sts-uid", Controller: &isController}}},
		Data: runtime.RawExtension{Raw: raw}, Revision: 1}
}

func deploymentWith(mut func(*corev1.PodSpec)) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "shop", UID: "dep-uid"}}
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "app"}}
	mut(&d.Spec.Template.Spec)
	return d
}

// Rule 7 holds for the config references PodSpecRefs knows (regression).
func TestGCKeepsAReferencedRevision(t *testing.T) {
	vol := func(v corev1.VolumeSource) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) { s.Volumes = append(s.Volumes, corev1.Volume{Name: "v", VolumeSource: v}) }
	}
	for _, tc := range []struct {
		name string
		kind core.Kind
		w    gc.Workload
	}{
		{"Pod secret volume", core.KindSecret, gc.FromPod(podWith(vol(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "rev-1"}})))},
		{"Pod ephemeral container envFrom", core.KindConfigMap, gc.FromPod(podWith(func(s *corev1.PodSpec) {
			s.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg",
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "rev-1"}}}}}}}
		}))},
		{"Deployment projected configMap (optional)", core.KindConfigMap, gc.FromDeployment(deploymentWith(vol(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "rev-1"}, Optional: ptrTo(true)}}}}})))},
		{"CronJob init container env", core.KindConfigMap, gc.FromCronJob(&batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "c", UID: "cj-uid"},
			Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{{Name: "i", Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{
					ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "rev-1"}, Key: "k"}}}}}}}}}}}})},
		{"CronJob jobTemplate annotation", core.KindConfigMap, gc.FromCronJob(&batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "c", UID: "cj-uid"},
			Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{core.AnnotationConfigMaps: " x , rev-1 "}}}}})},
		{"StatefulSet ControllerRevision (an earlier template, rollout undo)", core.KindConfigMap, gc.FromControllerRevision(revisionWith(t, corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "rev-1"}}}}}}))},
		{"DaemonSet ControllerRevision envFrom", core.KindSecret, gc.FromControllerRevision(revisionWith(t, corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "rev-1"}}}}}}}))},
		{"terminating ReplicaSet", core.KindConfigMap, gc.FromReplicaSet(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "rs", UID: "rs-uid", DeletionTimestamp: &metav1.Time{Time: brkNow}},
			Spec: appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "rev-1"}}}}}}}}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := planOne(t, tc.kind, tc.w)
			assert.NotEqual(t, gc.Delete, it.Decision, "rule 7: %s", it.Reason)
		})
	}
}

// Rule 7: "referenced by no live pod template or Pod". A pod spec references Secrets
// in more places than PodSpecRefs reads (it deliberately skips imagePullSecrets, and
// knows no volume plugin's secretRef). An opted-in Secret revision used only there -
// e.g. a kustomize secretGenerator docker-registry Secret with a hash suffix, or a CSI
// driver's nodePublishSecretRef - is deleted while live Pods need it to pull images /
// mount volumes on their next restart.
func TestGCKeepsASecretReferencedOutsidePodSpecRefs(t *testing.T) {
	pull := func(s *corev1.PodSpec) { s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "rev-1"}} }
	vol := func(v corev1.VolumeSource) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) { s.Volumes = append(s.Volumes, corev1.Volume{Name: "v", VolumeSource: v}) }
	}
	ref := &corev1.LocalObjectReference{Name: "rev-1"}
	for _, tc := range []struct {
		name string
		w    gc.Workload
	}{
		{"Pod imagePullSecrets", gc.FromPod(podWith(pull))},
		{"Deployment imagePullSecrets", gc.FromDeployment(deploymentWith(pull))},
		{"Pod CSI nodePublishSecretRef", gc.FromPod(podWith(vol(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io", NodePublishSecretRef: ref}})))},
		{"Deployment azureFile secretName", gc.FromDeployment(deploymentWith(vol(corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{SecretName: "rev-1", ShareName: "s"}})))},
		{"Pod cephfs secretRef", gc.FromPod(podWith(vol(corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{Monitors: []string{"m"}, SecretRef: ref}})))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it := planOne(t, core.KindSecret, tc.w)
			assert.NotEqual(t, gc.Delete, it.Decision, "rule 7: deleted a Secret a live pod spec references: %s", it.Reason)
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
