package cache

import (
	"encoding/json"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
)

// everyRefPodSpec is a pod spec that references a ConfigMap or Secret in every way
// core.PodSpecRefs documents, mixed with fields that name none (so the lean copy has
// something to drop), optional and required.
func everyRefPodSpec() corev1.PodSpec {
	lor := func(n string) corev1.LocalObjectReference { return corev1.LocalObjectReference{Name: n} }
	lorp := func(n string) *corev1.LocalObjectReference { return &corev1.LocalObjectReference{Name: n} }
	t := true
	env := func(p string) []corev1.EnvVar {
		return []corev1.EnvVar{
			{Name: "PLAIN", Value: "x"},
			{Name: "FIELD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "CMK", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: lor(p + "-cmkey"), Key: "k"}}},
			{Name: "SK", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: lor(p + "-skey"), Key: "k", Optional: &t}}},
		}
	}
	envFrom := func(p string) []corev1.EnvFromSource {
		return []corev1.EnvFromSource{
			{Prefix: "CM_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: lor(p + "-cmfrom")}},
			{Prefix: "S_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: lor(p + "-sfrom"), Optional: &t}},
		}
	}
	return corev1.PodSpec{
		ServiceAccountName: "sa",
		ImagePullSecrets:   []corev1.LocalObjectReference{lor("pull")},
		Volumes: []corev1.Volume{
			{Name: "empty", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: lor("vol-cm"), Optional: &t}}},
			{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "vol-sec"}}},
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "t"}},
				{DownwardAPI: &corev1.DownwardAPIProjection{}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: lor("proj-cm")}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: lor("proj-sec"), Optional: &t}},
			}}}},
			{Name: "proj-none", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "t"}}}}}},
			{Name: "csi", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: lorp("csi-sec")}}},
			{Name: "azf", VolumeSource: corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{SecretName: "azf-sec", ShareName: "s"}}},
			{Name: "ceph", VolumeSource: corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{Monitors: []string{"m"}, SecretRef: lorp("ceph-sec")}}},
			{Name: "rbd", VolumeSource: corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{CephMonitors: []string{"m"}, SecretRef: lorp("rbd-sec")}}},
			{Name: "iscsi", VolumeSource: corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{TargetPortal: "p", SecretRef: lorp("iscsi-sec")}}},
			{Name: "flex", VolumeSource: corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{Driver: "d", SecretRef: lorp("flex-sec")}}},
			{Name: "scaleio", VolumeSource: corev1.VolumeSource{ScaleIO: &corev1.ScaleIOVolumeSource{Gateway: "g", SecretRef: lorp("scaleio-sec")}}},
			{Name: "sos", VolumeSource: corev1.VolumeSource{StorageOS: &corev1.StorageOSVolumeSource{VolumeName: "v", SecretRef: lorp("sos-sec")}}},
			{Name: "cinder", VolumeSource: corev1.VolumeSource{Cinder: &corev1.CinderVolumeSource{VolumeID: "v", SecretRef: lorp("cinder-sec")}}},
		},
		InitContainers: []corev1.Container{{Name: "init", Image: "i", Env: env("init"), EnvFrom: envFrom("init")}, {Name: "init-plain", Image: "i"}},
		Containers:     []corev1.Container{{Name: "app", Image: "i", Env: env("app"), EnvFrom: envFrom("app")}, {Name: "side", Image: "i", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debug", Image: "i", Env: env("eph"), EnvFrom: envFrom("eph")}}},
	}
}

func everyRefTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
		Labels:      map[string]string{"app": "web"},
		Annotations: map[string]string{core.AnnotationConfigMaps: "tmpl-listed", core.AnnotationSecrets: "tmpl-listed-sec", "other": "x"}},
		Spec: everyRefPodSpec()}
}

func everyRefMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), ResourceVersion: "5",
		Labels:      map[string]string{"app": "web"},
		Annotations: map[string]string{core.AnnotationConfigMaps: "obj-listed", core.AnnotationSecrets: "obj-listed-sec", "kubectl.kubernetes.io/last-applied-configuration": "{}"}}
}

// TestLeanRefsParityEveryKind fails if any reference core.PodSpecRefs, core.ObjectRefs
// or the sweep's Workload (gc.FromX) finds in a full object is missing (or differs) in
// the lean copy the informers cache.
func TestLeanRefsParityEveryKind(t *testing.T) {
	spec := everyRefPodSpec()
	full := core.PodSpecRefs(&spec)
	if len(full) < 25 {
		t.Fatalf("fixture finds only %d refs: %+v", len(full), full)
	}
	if lean := core.RefsOnly(&spec); !reflect.DeepEqual(core.PodSpecRefs(&lean), full) {
		t.Errorf("PodSpecRefs(RefsOnly) differs:\n full %+v\n lean %+v", full, core.PodSpecRefs(&lean))
	}

	objs := everyRefObjects(t)
	sweepRefs := func(o any) []core.Ref {
		switch v := o.(type) {
		case *appsv1.ReplicaSet:
			return gc.FromReplicaSet(v).Refs
		case *appsv1.Deployment:
			return gc.FromDeployment(v).Refs
		case *appsv1.StatefulSet:
			return gc.FromStatefulSet(v).Refs
		case *appsv1.DaemonSet:
			return gc.FromDaemonSet(v).Refs
		case *batchv1.Job:
			return gc.FromJob(v).Refs
		case *batchv1.CronJob:
			return gc.FromCronJob(v).Refs
		case *corev1.Pod:
			return gc.FromPod(v).Refs
		case *unstructured.Unstructured:
			w, err := gc.FromRollout(v)
			if err != nil {
				t.Fatal(err)
			}
			return w.Refs
		}
		return nil
	}
	for kind, o := range objs {
		lean, err := Lean(o)
		if err != nil {
			t.Fatalf("%s: Lean: %v", kind, err)
		}
		if f, l := core.ObjectRefs(o), core.ObjectRefs(lean); !reflect.DeepEqual(f, l) {
			t.Errorf("%s: core.ObjectRefs differs:\n full %+v\n lean %+v", kind, f, l)
		}
		if f, l := core.ListedKeys(o), core.ListedKeys(lean); !reflect.DeepEqual(f, l) {
			t.Errorf("%s: core.ListedKeys differs: full %v lean %v", kind, f, l)
		}
		if kind == "ControllerRevision" {
			continue
		}
		if f, l := sweepRefs(o), sweepRefs(lean); !reflect.DeepEqual(f, l) {
			t.Errorf("%s: sweep Workload refs differ:\n full %+v\n lean %+v", kind, f, l)
		} else if len(f) < 25 && kind != "Deployment" {
			t.Errorf("%s: sweep finds only %d refs", kind, len(f))
		}
		// Lean of lean is lean (the paged list and the watch may both reduce).
		again, _ := Lean(lean)
		if f, l := core.ObjectRefs(o), core.ObjectRefs(again); !reflect.DeepEqual(f, l) {
			t.Errorf("%s: Lean(Lean) refs differ", kind)
		}
	}
}

// everyRefObjects is one object of every cached kind whose template (or pod spec)
// references config objects in every way core.PodSpecRefs documents.
func everyRefObjects(t *testing.T) map[string]any {
	t.Helper()
	spec, tmpl := everyRefPodSpec(), everyRefTemplate()
	cr := func() *appsv1.ControllerRevision {
		raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": tmpl, "replicas": 3}})
		if err != nil {
			t.Fatal(err)
		}
		m := everyRefMeta("sts-rev")
		isCtrl := true
		m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "sts", UID: "uid-sts", Controller: &isCtrl}}
		return &appsv1.ControllerRevision{ObjectMeta: m, Data: runtime.RawExtension{Raw: raw}, Revision: 2}
	}
	tm, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&tmpl)
	if err != nil {
		t.Fatal(err)
	}
	ro := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": core.RolloutKind,
		"spec": map[string]any{"replicas": int64(2), "template": tm}}}
	ro.SetName("ro")
	ro.SetNamespace("ns")
	ro.SetUID("uid-ro")
	ro.SetAnnotations(map[string]string{core.AnnotationConfigMaps: "obj-listed"})

	return map[string]any{
		"ReplicaSet":         &appsv1.ReplicaSet{ObjectMeta: everyRefMeta("rs"), Spec: appsv1.ReplicaSetSpec{Template: tmpl}},
		"Deployment":         &appsv1.Deployment{ObjectMeta: everyRefMeta("dep"), Spec: appsv1.DeploymentSpec{Template: tmpl}},
		"StatefulSet":        &appsv1.StatefulSet{ObjectMeta: everyRefMeta("sts"), Spec: appsv1.StatefulSetSpec{Template: tmpl}},
		"DaemonSet":          &appsv1.DaemonSet{ObjectMeta: everyRefMeta("ds"), Spec: appsv1.DaemonSetSpec{Template: tmpl}},
		"Job":                &batchv1.Job{ObjectMeta: everyRefMeta("job"), Spec: batchv1.JobSpec{Template: tmpl}},
		"CronJob":            &batchv1.CronJob{ObjectMeta: everyRefMeta("cj"), Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{core.AnnotationConfigMaps: "jobtmpl-listed"}}, Spec: batchv1.JobSpec{Template: tmpl}}}},
		"Pod":                &corev1.Pod{ObjectMeta: everyRefMeta("pod"), Spec: spec},
		"ControllerRevision": cr(),
		"Rollout":            ro,
	}
}
