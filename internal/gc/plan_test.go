package gc

import (
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func rev(name string, age time.Duration, mods ...func(*Revision)) Revision {
	r := Revision{Kind: core.KindConfigMap, Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
		Created: t0.Add(-age), Labels: map[string]string{core.LabelRevision: "true"}, Annotations: map[string]string{}}
	for _, m := range mods {
		m(&r)
	}
	return r
}

func family(f string) func(*Revision) { return func(r *Revision) { r.Labels[core.LabelFamily] = f } }
func ownedBy(apiVersion, kind, name string, uid types.UID) func(*Revision) {
	return func(r *Revision) {
		r.OwnerReferences = append(r.OwnerReferences, metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid})
	}
}

func volumeSpec(cm string) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}},
		Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}}}
}

func rsUsing(name string, uid types.UID, cm string) Workload {
	return FromReplicaSet(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid},
		Spec: appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{Spec: volumeSpec(cm)}}})
}

func snapshot(ws []Workload, rs ...Revision) *Snapshot {
	s := &Snapshot{Namespace: "shop", Revisions: rs, Workloads: ws, Listed: map[schema.GroupKind]bool{}, Live: map[types.UID]bool{}}
	for _, gk := range WorkloadKinds {
		s.Listed[gk] = true
	}
	for _, w := range ws {
		s.Live[w.UID] = true
	}
	return s
}

func TestPlanNamespace(t *testing.T) {
	opts := Options{MinAge: time.Hour, Keep: 1, Now: t0}
	cron := FromCronJob(&batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly", UID: "cron"},
		Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{{
				ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cron-cfg"}}}}}}}}}}}})
	pod := FromPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "debug", UID: "pod"}, Spec: corev1.PodSpec{
		EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg",
			Env: []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "eph-cfg"}, Key: "k"}}}}}}}}})
	annotated := FromDeployment(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "api", UID: "dep",
		Annotations: map[string]string{core.AnnotationConfigMaps: "listed-cfg, bad/name"}}})
	widgetRollout := Workload{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "ro", UID: "ro",
		WorkloadRef: &TargetRef{APIVersion: "example.com/v1", Kind: "Widget", Name: "w"}}

	cases := []struct {
		name     string
		snap     *Snapshot
		opts     Options
		want     map[string]Decision
		reason   map[string]string // substring of the reason
		repairTo []string
	}{
		{name: "true orphan is deleted", snap: snapshot(nil, rev("a-1", 3*time.Hour, family("a")), rev("a-2", 2*time.Hour, family("a"))),
			want: map[string]Decision{"a-1": Delete, "a-2": Keep}, reason: map[string]string{"a-2": "newest unreferenced #1"}},
		{name: "grace period", snap: snapshot(nil, rev("a-1", 59*time.Minute, family("a")), rev("a-2", 30*time.Minute, family("a"))),
			want: map[string]Decision{"a-1": Keep}, reason: map[string]string{"a-1": "younger than the grace period"}},
		{name: "keep ranks only unreferenced revisions", snap: snapshot([]Workload{rsUsing("web-1", "rs1", "a-3")},
			rev("a-1", 5*time.Hour, family("a")), rev("a-2", 4*time.Hour, family("a")), rev("a-3", 3*time.Hour, family("a"), ownedBy("apps/v1", "ReplicaSet", "web-1", "rs1"))),
			want: map[string]Decision{"a-1": Delete, "a-2": Keep, "a-3": Keep}},
		{name: "no opt-in label", snap: snapshot(nil, rev("x", 5*time.Hour, func(r *Revision) { delete(r.Labels, core.LabelRevision) }), rev("x-2", time.Hour)),
			opts: Options{MinAge: time.Hour, Now: t0}, want: map[string]Decision{"x": Keep}, reason: map[string]string{"x": "not opted in"}},
		{name: "skip annotation", snap: snapshot(nil, rev("s", 5*time.Hour, func(r *Revision) { r.Annotations[core.AnnotationSkip] = "true" })),
			opts: Options{Now: t0}, want: map[string]Decision{"s": Keep}, reason: map[string]string{"s": "skip"}},
		{name: "the Flux prune guard keeps nothing from the sweep", snap: snapshot(nil,
			rev("f", 5*time.Hour, func(r *Revision) { r.Annotations[core.FluxPruneKey] = core.FluxPruneDisabled })),
			opts: Options{Now: t0}, want: map[string]Decision{"f": Delete}},
		{name: "being deleted", snap: snapshot(nil, rev("d", 5*time.Hour, func(r *Revision) { r.Deleting = true })),
			opts: Options{Now: t0}, want: map[string]Decision{"d": Keep}, reason: map[string]string{"d": "already being deleted"}},
		{name: "CronJob-only reference keeps it", snap: snapshot([]Workload{cron}, rev("cron-cfg", 5*time.Hour)),
			opts: Options{Now: t0}, want: map[string]Decision{"cron-cfg": Keep}, reason: map[string]string{"cron-cfg": "referenced by CronJob/nightly"}},
		{name: "ephemeral container reference keeps it", snap: snapshot([]Workload{pod}, rev("eph-cfg", 5*time.Hour)),
			opts: Options{Now: t0}, want: map[string]Decision{"eph-cfg": Keep}, reason: map[string]string{"eph-cfg": "Pod/debug"}},
		{name: "annotation listing keeps it", snap: snapshot([]Workload{annotated}, rev("listed-cfg", 5*time.Hour)),
			opts: Options{Now: t0}, want: map[string]Decision{"listed-cfg": Keep}, reason: map[string]string{"listed-cfg": "Deployment/api"}},
		{name: "live owner keeps it", snap: snapshot([]Workload{rsUsing("web-1", "rs1", "other")}, rev("o", 5*time.Hour, ownedBy("apps/v1", "ReplicaSet", "web-1", "rs1"))),
			opts: Options{Now: t0}, want: map[string]Decision{"o": Keep}, reason: map[string]string{"o": "owned by live ReplicaSet/web-1"}},
		{name: "dangling owner UID counts as absent", snap: snapshot([]Workload{rsUsing("web-1", "rs-new", "other")}, rev("o", 5*time.Hour, ownedBy("apps/v1", "ReplicaSet", "web-1", "rs-old"))),
			opts: Options{Now: t0}, want: map[string]Decision{"o": Delete}},
		{name: "owner of an unlisted kind counts as live", snap: snapshot(nil, rev("o", 5*time.Hour, ownedBy("example.com/v1", "Widget", "w", "w1"))),
			opts: Options{Now: t0}, want: map[string]Decision{"o": Keep}, reason: map[string]string{"o": "Widget/w"}},
		{name: "referenced, unattached: repair", snap: snapshot([]Workload{rsUsing("web-2", "rs2", "r"), rsUsing("web-1", "rs1", "r")}, rev("r", 5*time.Hour, ownedBy("apps/v1", "ReplicaSet", "web-1", "rs1"))),
			opts: Options{Now: t0}, want: map[string]Decision{"r": Repair}, repairTo: []string{"web-2"}},
		{name: "referenced only by a terminating ReplicaSet: keep, no repair", snap: snapshot([]Workload{func() Workload { w := rsUsing("web-1", "rs1", "r"); w.Deleting = true; return w }()}, rev("r", 5*time.Hour)),
			opts: Options{Now: t0}, want: map[string]Decision{"r": Keep}, reason: map[string]string{"r": "referenced by ReplicaSet/web-1"}},
		{name: "Secret and ConfigMap of one name are distinct", snap: snapshot([]Workload{rsUsing("web-1", "rs1", "same")}, rev("same", 5*time.Hour, func(r *Revision) { r.Kind = core.KindSecret; r.UID = "sec" })),
			opts: Options{Now: t0}, want: map[string]Decision{"same": Delete}},
		{name: "workloadRef to an unlisted kind keeps everything", snap: snapshot([]Workload{widgetRollout}, rev("o", 5*time.Hour)),
			opts: Options{Now: t0}, want: map[string]Decision{"o": Keep}, reason: map[string]string{"o": "doubt"}},
		{name: "keep ranks a family's ConfigMaps and Secrets apart", snap: snapshot(nil,
			rev("a-cm-1", 5*time.Hour, family("a")), rev("a-cm-2", 4*time.Hour, family("a")),
			rev("a-sec-1", 3*time.Hour, family("a"), func(r *Revision) { r.Kind = core.KindSecret }),
			rev("a-sec-2", 2*time.Hour, family("a"), func(r *Revision) { r.Kind = core.KindSecret })),
			want:   map[string]Decision{"a-cm-1": Delete, "a-cm-2": Keep, "a-sec-1": Delete, "a-sec-2": Keep},
			reason: map[string]string{"a-cm-2": "newest unreferenced #1", "a-sec-2": "newest unreferenced #1"}},
		{name: "keep 0 deletes every old orphan", snap: snapshot(nil, rev("a-1", 3*time.Hour, family("a")), rev("a-2", 2*time.Hour, family("a"))),
			opts: Options{MinAge: time.Hour, Keep: 0, Now: t0}, want: map[string]Decision{"a-1": Delete, "a-2": Delete}},
		{name: "numbered and versioned orphans are one family; the rules before keep-N still keep", snap: snapshot([]Workload{rsUsing("web-7f9c", "rs1", "web-config-5")},
			rev("web-config-0", 6*time.Hour, func(r *Revision) { r.Annotations[core.AnnotationSkip] = "true" }),
			rev("web-config-1", 5*time.Hour), rev("web-config-2", 4*time.Hour), rev("web-config-3", 3*time.Hour), rev("web-config-v4", 2*time.Hour),
			rev("web-config-5", 90*time.Minute, ownedBy("apps/v1", "ReplicaSet", "web-7f9c", "rs1")), rev("web-config-7", 10*time.Minute)),
			opts: Options{MinAge: time.Hour, Keep: 2, Now: t0},
			want: map[string]Decision{"web-config-0": Keep, "web-config-1": Delete, "web-config-2": Delete, "web-config-3": Delete,
				"web-config-v4": Keep, "web-config-5": Keep, "web-config-7": Keep},
			reason: map[string]string{"web-config-0": "skip", "web-config-v4": `#2 of family "web-config"`, "web-config-5": "referenced by",
				"web-config-7": "younger than", "web-config-1": `#5 of family "web-config"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			if o.Now.IsZero() {
				o = opts
			}
			p, err := PlanNamespace(tc.snap, o)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]Item{}
			for _, it := range p.Items {
				got[it.Name] = it
			}
			for name, want := range tc.want {
				if got[name].Decision != want {
					t.Errorf("%s: decision %q (%s), want %q", name, got[name].Decision, got[name].Reason, want)
				}
			}
			for name, sub := range tc.reason {
				if !strings.Contains(got[name].Reason, sub) {
					t.Errorf("%s: reason %q does not contain %q", name, got[name].Reason, sub)
				}
			}
			if tc.repairTo != nil {
				for _, it := range p.Items {
					if it.Decision == Repair {
						var names []string
						for _, r := range it.Repair {
							names = append(names, r.Name)
						}
						if strings.Join(names, ",") != strings.Join(tc.repairTo, ",") {
							t.Errorf("repair to %v, want %v", names, tc.repairTo)
						}
					}
				}
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		ok   bool
	}{
		{"defaults", DefaultOptions(), true},
		{"zero", Options{}, true},
		{"negative age", Options{MinAge: -time.Second}, false},
		{"negative keep", Options{Keep: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, ok want %v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, core.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			if _, perr := PlanNamespace(snapshot(nil), tc.o); (perr == nil) != tc.ok {
				t.Fatalf("PlanNamespace error %v", perr)
			}
		})
	}
}

func TestStripHashSuffix(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"app-config-7fh9k2c8tm", "app-config"},
		{"app-config-b4m2t7kg9h", "app-config"},
		{"app-config-bcdfghjklm", "app-config"}, // kustomize alphabet, no digit
		{"app-config-1a2b3c4d", "app-config"},
		{"app-config", "app-config"},
		{"app-config-v2", "app-config"}, // a version suffix, like a hash
		{"app-config-1", "app-config"},
		{"app-config-42", "app-config"},
		{"app-config-V2", "app-config-V2"}, // not a DNS name's version: unchanged
		{"app-config-v", "app-config-v"},
		{"app-config-v2b", "app-config-v2b"},
		{"app-config-2v", "app-config-2v"},
		{"v2", "v2"},
		{"-1", "-1"},
		{"app-config-blue", "app-config-blue"},
		{"app-config-green", "app-config-green"},
		{"config", "config"},
		{"-abc12", "-abc12"},
		{"trailing-", "trailing-"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := StripHashSuffix(tc.in); got != tc.want {
				t.Fatalf("StripHashSuffix(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestFamilyOf(t *testing.T) {
	ctrl := true
	rsLive := Workload{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d4c", UID: "rs1",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "web", UID: "ro", Controller: &ctrl}}}
	byUID := map[types.UID]*Workload{"rs1": &rsLive}
	for _, tc := range []struct {
		name string
		r    Revision
		want string
	}{
		{"label wins", rev("x-7fh9k2c8tm", 0, family("fam"), ownedBy("apps/v1", "ReplicaSet", "web-5d4c", "rs1")), "fam"},
		{"live ReplicaSet's controller", rev("x-7fh9k2c8tm", 0, ownedBy("apps/v1", "ReplicaSet", "web-5d4c", "rs1")), "web"},
		{"dead ReplicaSet: name without hash", rev("x", 0, ownedBy("apps/v1", "ReplicaSet", "api-6b8f9c7d5", "gone")), "api"},
		{"other owner kind", rev("x", 0, ownedBy("example.com/v1", "Widget", "w", "w1")), "w"},
		{"unowned: stripped name", rev("cfg-7fh9k2c8tm", 0), "cfg"},
		{"unowned: numbered name", rev("web-config-2", 0), "web-config"},
		{"unowned: versioned name", rev("web-config-v4", 0), "web-config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FamilyOf(&tc.r, byUID); got != tc.want {
				t.Fatalf("FamilyOf = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFromRollout(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
		"metadata": map[string]any{"name": "web", "uid": "ro1", "annotations": map[string]any{core.AnnotationSecrets: "tls-1"}},
		"spec": map[string]any{
			"replicas":    int64(3),
			"workloadRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web-base"},
			"template": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "app",
				"envFrom": []any{map[string]any{"configMapRef": map[string]any{"name": "web-cfg"}}}}}}},
		},
	}}
	w, err := FromRollout(u)
	if err != nil {
		t.Fatal(err)
	}
	if w.WorkloadRef == nil || w.WorkloadRef.GroupKind() != GKDeployment || w.WorkloadRef.Name != "web-base" {
		t.Fatalf("workloadRef %+v", w.WorkloadRef)
	}
	var got []string
	for _, r := range w.Refs {
		got = append(got, string(r.Kind)+"/"+r.Name)
	}
	if strings.Join(got, ",") != "ConfigMap/web-cfg,Secret/tls-1" || w.Replicas != 3 || w.GroupKind() != GKRollout {
		t.Fatalf("refs %v replicas %d gk %v", got, w.Replicas, w.GroupKind())
	}
}

func TestSelectAndConfirm(t *testing.T) {
	s := snapshot(nil, rev("a-1", 3*time.Hour, family("a")), rev("b-1", 3*time.Hour, family("b")))
	p, err := PlanNamespace(s, Options{Now: t0})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, sel string
		want      int
	}{{"all", "", 2}, {"family a", core.LabelFamily + "=a", 1}, {"none", "x=y", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			sel, err := labels.Parse(tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(Select(p, s, sel).Items); got != tc.want {
				t.Fatalf("%d items, want %d", got, tc.want)
			}
		})
	}
	s.Revisions[0].ResourceVersion = "2"
	p2, _ := PlanNamespace(s, Options{Now: t0})
	c := Confirm(p, p2)
	if c.Count(Delete) != 1 || c.Items[0].Decision != Keep || !strings.Contains(c.Items[0].Reason, "changed") {
		t.Fatalf("Confirm: %+v", c.Items)
	}
}
