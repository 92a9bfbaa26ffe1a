package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/inspect"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// Bad flags are usage errors (exit 2) before any cluster is contacted.
func TestGCAndStatusUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bad dry-run", []string{"gc", "--dry-run=maybe"}, "--dry-run"},
		{"bad output", []string{"gc", "-o", "xml"}, "--output"},
		{"negative keep", []string{"gc", "--gc-keep=-1"}, "gc-keep"},
		{"negative age", []string{"gc", "--gc-min-age=-1h"}, "gc-min-age"},
		{"namespace and all", []string{"gc", "-n", "a", "-A"}, "exclusive"},
		{"bad selector", []string{"gc", "--selector", "a in (("}, "--selector"},
		{"unknown flag", []string{"gc", "--nope"}, "unknown flag"},
		{"status bad output", []string{"status", "-o", "name"}, "--output"},
		{"status bad interval", []string{"status", "--interval=0s"}, "--interval"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(context.Background(), tc.args...)
			if code != cli.ExitUsage || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d mentioning %q", code, stderr, cli.ExitUsage, tc.want)
			}
		})
	}
}

func TestGCOptionsDefaults(t *testing.T) {
	o := cli.DefaultGCOptions()
	if o.DryRun != cli.DryRunClient || o.MinAge != gc.DefaultMinAge || o.Keep != gc.DefaultKeep {
		t.Fatalf("defaults %+v", o)
	}
	for _, tc := range []struct{ in, want string }{{"client", "client"}, {"server", "server"}, {"none", "none"}, {"true", "client"}, {"false", "none"}} {
		t.Run(tc.in, func(t *testing.T) {
			o := cli.DefaultGCOptions()
			o.DryRun = tc.in
			if _, err := o.Validate(); err != nil || o.DryRun != tc.want {
				t.Fatalf("Validate: %v, DryRun %q want %q", err, o.DryRun, tc.want)
			}
		})
	}
}

// BuildStatus and RenderStatus: a Rollout's ReplicaSets with the revisions they own
// and use, the unattached and the orphaned revisions.
func TestStatusTree(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	ctrl := true
	rsRef := func(name string, uid types.UID) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: name, UID: uid}
	}
	rolloutOwner := []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "web", UID: "ro", Controller: &ctrl}}
	snap := &gc.Snapshot{Namespace: "shop", Listed: map[schema.GroupKind]bool{}, Live: map[types.UID]bool{"rs2": true, "rs1": true, "ro": true, "cj": true},
		Workloads: []gc.Workload{
			{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "web", UID: "ro"},
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-2222", UID: "rs2", Revision: "2", PodHash: "2222", Replicas: 2, ReadyReplicas: 1,
				Created: now.Add(-time.Hour), OwnerReferences: rolloutOwner, Refs: []core.Ref{{Kind: core.KindConfigMap, Name: "cfg-b"}, {Kind: core.KindConfigMap, Name: "flags-a"}}},
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1111", UID: "rs1", Revision: "1", PodHash: "1111",
				Created: now.Add(-2 * time.Hour), OwnerReferences: rolloutOwner, Refs: []core.Ref{{Kind: core.KindConfigMap, Name: "cfg-a"}}},
			{APIVersion: "batch/v1", Kind: "CronJob", Name: "nightly", UID: "cj", Refs: []core.Ref{{Kind: core.KindConfigMap, Name: "nightly-1"}}},
		},
		Revisions: []gc.Revision{
			{Kind: core.KindConfigMap, Name: "cfg-a", UID: "a", Created: now.Add(-3 * time.Hour), OwnerReferences: []metav1.OwnerReference{rsRef("web-1111", "rs1")}},
			{Kind: core.KindConfigMap, Name: "cfg-b", UID: "b", Created: now.Add(-time.Hour), OwnerReferences: []metav1.OwnerReference{rsRef("web-2222", "rs2")}},
			{Kind: core.KindConfigMap, Name: "flags-a", UID: "f", Created: now.Add(-time.Hour)},
			{Kind: core.KindConfigMap, Name: "nightly-1", UID: "n", Created: now.Add(-time.Hour)},
			{Kind: core.KindConfigMap, Name: "old-1", UID: "o", Created: now.Add(-48 * time.Hour)},
		}}
	for _, gk := range gc.WorkloadKinds {
		snap.Listed[gk] = true
	}
	for i := range snap.Revisions {
		snap.Revisions[i].Labels = map[string]string{core.LabelRevision: "true"}
	}
	plan, err := gc.PlanNamespace(snap, gc.Options{MinAge: time.Hour, Keep: 0, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	st := inspect.Build(snap, plan, nil, false)
	var buf bytes.Buffer
	cli.RenderStatus(&buf, st, now)
	out := buf.String()
	t.Log("\n" + out)
	for _, want := range []string{
		"Rollout web\n├── ReplicaSet web-2222  revision:2  hash:2222  ready:1/2  age:1h\n│   ├── ConfigMap cfg-b  owned",
		"│   └── ConfigMap flags-a  used, NOT attached",
		"└── ReplicaSet web-1111  revision:1  hash:1111  ready:0/0  age:2h\n    └── ConfigMap cfg-a  owned",
		"CronJob nightly\n└── ConfigMap nightly-1  used",
		"Unattached revisions (used, not owned by a ReplicaSet using them): 2",
		"ConfigMap flags-a", "gc: repair",
		"Orphaned revisions (unused, no live owner): 1\n└── ConfigMap old-1",
		"gc: delete",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// On the local control plane: the gc command's dry-run plan (-o json) lists exactly
// what --dry-run=none then deletes; status shows the tree.
func TestGCCommandDryRunThenDelete(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ctx := context.Background()
	kc := cp.Client()
	ns := newNamespace(t, cp)
	for _, name := range []string{"app-cfg-1x2y3", "app-cfg-4z5w6", "db-cfg-7q8r9"} {
		_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{core.LabelRevision: "true"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	lbl := map[string]string{"app": "db"}
	_, err := kc.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "db-5f4d3c2b1", Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{Replicas: new(int32), Selector: &metav1.LabelSelector{MatchLabels: lbl}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: lbl}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "example.invalid/db:1"}},
				Volumes: []corev1.Volume{{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "db-cfg-7q8r9"}}}}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"gc", "--kubeconfig", cp.Kubeconfig(), "-n", ns, "--gc-min-age=0s", "--gc-keep=0"}

	code, table, stderr := run(ctx, base...)
	if code != 0 || !strings.Contains(table, "NAMESPACE") || !strings.Contains(table, "would-delete") && !strings.Contains(table, "delete") {
		t.Fatalf("table dry run: exit %d\n%s\n%s", code, table, stderr)
	}
	t.Log("\n" + table)

	code, out, stderr := run(ctx, append(base, "-o", "json")...)
	if code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, stderr)
	}
	want := names(t, out, gc.OutcomeWouldDelete)
	if fmt.Sprint(want) != "[app-cfg-1x2y3 app-cfg-4z5w6]" {
		t.Fatalf("dry run would delete %v:\n%s", want, out)
	}
	// Server dry run: the apiserver checks every delete (preconditions, RBAC) and keeps all.
	code, out, stderr = run(ctx, append(base, "--dry-run=server", "-o", "json")...)
	if got := names(t, out, gc.OutcomeWouldDelete); code != 0 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("server dry run: exit %d, would delete %v, want %v: %s", code, got, want, stderr)
	}
	for _, n := range want {
		if _, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{}); err != nil {
			t.Fatalf("server dry run deleted %s: %v", n, err)
		}
	}
	code, out, stderr = run(ctx, append(base, "--dry-run=none", "-o", "json")...)
	if code != 0 {
		t.Fatalf("real run: exit %d: %s", code, stderr)
	}
	if got := names(t, out, gc.OutcomeDeleted); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("real run deleted %v, dry run said %v", got, want)
	}
	for _, n := range want {
		if _, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%s: %v", n, err)
		}
	}
	// The referenced one was repaired (attached to its ReplicaSet); status shows it owned.
	code, out, stderr = run(ctx, "status", "--kubeconfig", cp.Kubeconfig(), "-n", ns)
	if code != 0 || !strings.Contains(out, "ReplicaSet db-5f4d3c2b1") || !strings.Contains(out, "ConfigMap db-cfg-7q8r9  owned") {
		t.Fatalf("status: exit %d\n%s\n%s", code, out, stderr)
	}
	t.Log("\n" + out)
}

func names(t *testing.T, out string, o gc.Outcome) []string {
	t.Helper()
	var doc cli.GCOutput
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var ns []string
	for _, r := range doc.Namespaces {
		for _, it := range r.Results {
			if it.Outcome == o {
				ns = append(ns, it.Name)
			}
		}
	}
	return ns
}

// status --watch re-renders when a revision appears, and only then.
func TestStatusWatch(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	kc := cp.Client()
	ns := newNamespace(t, cp)
	mk := func(name string) {
		_, err := kc.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{core.LabelRevision: "true"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	mk("first-cfg")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb testfix.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"status", "--kubeconfig", cp.Kubeconfig(), "-n", ns, "--watch", "--interval=200ms"},
			cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	}()
	controlplane.Eventually(t, 20*time.Second, "the first render", func() error {
		if !strings.Contains(out.String(), "ConfigMap first-cfg") {
			return fmt.Errorf("output so far: %q", out.String())
		}
		return nil
	})
	time.Sleep(time.Second) // several polls with no change: no re-render
	if n := strings.Count(out.String(), "Namespace: "); n != 1 {
		t.Fatalf("%d renders without a change:\n%s", n, out.String())
	}
	mk("second-cfg")
	controlplane.Eventually(t, 20*time.Second, "a re-render with the new revision", func() error {
		if !strings.Contains(out.String(), "ConfigMap second-cfg") || strings.Count(out.String(), "Namespace: ") != 2 {
			return fmt.Errorf("output so far: %q", out.String())
		}
		return nil
	})
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
}
