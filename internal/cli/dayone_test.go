package cli_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/inspect"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// dayOneCase is one row of a first-hour friction: the command, its exit code, and
// what stdout and stderr must (and must not) say.
type dayOneCase struct {
	name      string
	args      []string
	env       map[string]string
	wantCode  int
	wantOut   []string
	noOut     []string
	wantErr   []string
	noErr     []string
	errLines  int // when > 0, exactly this many lines on stderr
	emptyErr  bool
	emptyOut  bool
	wantFirst string // the first line of stdout
	wantLast  string // in the last line of stderr (the final error)
}

func (tc dayOneCase) check(t *testing.T, code int, out, errOut string) {
	t.Helper()
	assert.Equal(t, tc.wantCode, code, "stdout: %s\nstderr: %s", out, errOut)
	for _, w := range tc.wantOut {
		assert.Contains(t, out, w)
	}
	for _, w := range tc.noOut {
		assert.NotContains(t, out, w)
	}
	for _, w := range tc.wantErr {
		assert.Contains(t, errOut, w)
	}
	for _, w := range tc.noErr {
		assert.NotContains(t, errOut, w)
	}
	if tc.errLines > 0 {
		assert.Len(t, strings.Split(strings.TrimSpace(errOut), "\n"), tc.errLines, "stderr: %q", errOut)
	}
	if tc.emptyErr {
		assert.Empty(t, errOut)
	}
	if tc.emptyOut {
		assert.Empty(t, out)
	}
	if tc.wantFirst != "" {
		assert.Equal(t, tc.wantFirst, strings.SplitN(out, "\n", 2)[0])
	}
	if tc.wantLast != "" {
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		assert.Contains(t, lines[len(lines)-1], tc.wantLast)
	}
}

func runTable(t *testing.T, cases []dayOneCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			// A bound, not a speed check: a command that waited for its --timeout instead
			// of failing at once is cut off here and exits 130, not the code wanted.
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			code, out, errOut := run(ctx, tc.args...)
			tc.check(t, code, out, errOut)
		})
	}
}

// Fail fast, show progress, tell the truth (issue 18, first group).
func TestFirstHourFailsFastAndTellsTheTruth(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ctx := context.Background()
	kc := cp.Client()
	ns := newNamespace(t, cp)
	testfix.CreateReplicaSet(t, kc, ns, "web-1", "web-config")
	_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	createRolloutWithoutStatus(t, cp, ns, "web", "web-config") // its controller never observes it: a wait
	kcfg := cp.Kubeconfig()
	defer cli.SetProgressEvery(50 * time.Millisecond)()
	legacyEnv := map[string]string{"KUBECONFIG": kcfg, "IS_IN_CLUSTER": "false"}
	typo := ns + "x"

	runTable(t, []dayOneCase{
		{name: "the old form with a namespace that does not exist fails at once",
			args: []string{"-rollout", "web", "-namespace", typo, "-configmaps", "web-config"}, env: legacyEnv,
			wantCode: 1, wantErr: []string{`namespace "` + typo + `" not found`, `did you mean "` + ns + `"?`}, errLines: 1},
		{name: "attach with a namespace that does not exist fails at once",
			args:     []string{"attach", "--kubeconfig", kcfg, "-n", typo, "--rollout", "web"},
			wantCode: 1, wantErr: []string{`namespace "` + typo + `" not found`}, errLines: 1},
		{name: "gc with a namespace that does not exist fails at once",
			args:     []string{"gc", "--kubeconfig", kcfg, "-n", typo},
			wantCode: 1, wantErr: []string{`namespace "` + typo + `" not found`}, errLines: 1, emptyOut: true},
		{name: "status with a namespace that does not exist fails at once",
			args:     []string{"status", "--kubeconfig", kcfg, "-n", typo},
			wantCode: 1, wantErr: []string{`namespace "` + typo + `" not found`}, errLines: 1, emptyOut: true},
		{name: "a wait says on stderr what is still missing",
			args:     []string{"attach", "--kubeconfig", kcfg, "-n", ns, "--rollout", "web", "--configmaps", "web-confg", "--timeout", "2s"},
			wantCode: 1, wantErr: []string{"waiting for Rollout " + ns + "/web (", "not yet observed", `did you mean ConfigMap "web-config"?`, "timed out"}},
		{name: "a wait that times out names the closest name in its final error",
			args:     []string{"attach", "--kubeconfig", kcfg, "-n", ns, "--rollout", "web", "--configmaps", "web-confg", "--timeout", "1s"},
			wantCode: 1, wantLast: `did you mean ConfigMap "web-config"?`},
		{name: "the old form says what it still waits for",
			args: []string{"-rollout", "web", "-namespace", ns, "-configmaps", "web-config", "-timeout", "2s"}, env: legacyEnv,
			wantCode: 1, wantErr: []string{"waiting for Rollout " + ns + "/web (", "timed out"}},
		{name: "attach fails when a ConfigMap named on the command line does not exist",
			args:     []string{"attach", "--kubeconfig", kcfg, "-n", ns, "--replicaset", "web-1", "--configmaps", "web-config,nope"},
			wantCode: 1, wantOut: []string{"nope", "missing"}, wantErr: []string{"ConfigMap " + ns + "/nope not found (named on the command line)"}, errLines: 1},
		{name: "attach is quiet on stderr on success",
			args:     []string{"attach", "--kubeconfig", kcfg, "-n", ns, "--replicaset", "web-1", "--configmaps", "web-config"},
			wantCode: 0, wantOut: []string{"web-config", "already-attached"}, emptyErr: true},
		{name: "attach -v logs at info on stderr",
			args:     []string{"attach", "-v", "--kubeconfig", kcfg, "-n", ns, "--replicaset", "web-1", "--configmaps", "web-config"},
			wantCode: 0, wantErr: []string{"level=INFO"}},
		{name: "attach --log-level info logs at info on stderr",
			args:     []string{"attach", "--log-level", "info", "--kubeconfig", kcfg, "-n", ns, "--replicaset", "web-1", "--configmaps", "web-config"},
			wantCode: 0, wantErr: []string{"level=INFO"}},
		{name: "gc is quiet on stderr on success",
			args:     []string{"gc", "--kubeconfig", kcfg, "-n", ns},
			wantCode: 0, emptyErr: true},
		{name: "status is quiet on stderr on success",
			args:     []string{"status", "--kubeconfig", kcfg, "-n", ns},
			wantCode: 0, emptyErr: true},
		{name: "-v before the old form's flags is the old form's -v",
			args: []string{"-v", "-rollout", "web", "-namespace", typo, "-configmaps", "web-config"}, env: legacyEnv,
			wantCode: 1, wantErr: []string{`namespace "` + typo + `" not found`}},
		{name: "a typo in the old form prints its error once, with a suggestion",
			args: []string{"-rollout", "web", "-namespce", ns, "-configmaps", "web-config"}, env: legacyEnv,
			wantCode: 2, wantErr: []string{"-namespce", "did you mean -namespace?"}, errLines: 1, emptyOut: true},
	})
}

// Ctrl-C or SIGTERM during a wait is "interrupted" with the shell's exit code, not a
// timeout: the signal context of main (signal.NotifyContext) carries the signal.
func TestInterruptedWaitSaysSoAndExitsWithTheSignalsCode(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ns := newNamespace(t, cp)
	createRolloutWithoutStatus(t, cp, ns, "web", "web-config")
	defer cli.SetProgressEvery(50 * time.Millisecond)()
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
		name string
	}{{syscall.SIGINT, cli.ExitInterrupted, "SIGINT"}, {syscall.SIGTERM, cli.ExitTerminated, "SIGTERM"}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var out, errb testfix.SyncBuffer
			done := make(chan int, 1)
			go func() {
				done <- cli.Main(ctx, []string{"attach", "--kubeconfig", cp.Kubeconfig(), "-n", ns, "--rollout", "web", "--timeout", "10m"},
					cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
			}()
			controlplane.Eventually(t, 60*time.Second, "the command is waiting", func() error {
				if !strings.Contains(errb.String(), "waiting for Rollout") {
					return assert.AnError
				}
				return nil
			})
			require.NoError(t, syscall.Kill(os.Getpid(), tc.sig))
			code := <-done
			assert.Equal(t, tc.code, code, "stderr: %s", errb.String())
			lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
			assert.Equal(t, "error: interrupted ("+tc.name+"): stopped before the command finished", lines[len(lines)-1])
			assert.NotContains(t, errb.String(), "timed out")
		})
	}
}

// One vocabulary across commands (issue 18, second group): the same flag means the
// same, and the same mistake gets the same exit code, on every command.
func TestFirstHourOneVocabulary(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ctx := context.Background()
	kc := cp.Client()
	ns := newNamespace(t, cp)
	empty := newNamespace(t, cp)
	testfix.CreateReplicaSet(t, kc, ns, "web-1", "web-config")
	_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, testfix.Revision(ns, "web-config"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kc.CoreV1().ConfigMaps(ns).Create(ctx, testfix.Revision(ns, "old-config"), metav1.CreateOptions{})
	require.NoError(t, err)
	kcfg := cp.Kubeconfig()
	attach := func(extra ...string) []string {
		return append([]string{"attach", "--kubeconfig", kcfg, "-n", ns, "--replicaset", "web-1"}, extra...)
	}
	gcArgs := func(extra ...string) []string {
		return append([]string{"gc", "--kubeconfig", kcfg, "-n", ns, "--gc-min-age=0s", "--gc-keep=0"}, extra...)
	}

	runTable(t, []dayOneCase{
		{name: "attach --dry-run=server is the apiserver's dry run", args: attach("--dry-run=server"),
			wantCode: 0, wantOut: []string{"web-config", "would-attach", "(dry run: server, nothing stored)"}, emptyErr: true},
		{name: "attach --dry-run is client", args: attach("--dry-run"),
			wantCode: 0, wantOut: []string{"would-attach", "(dry run: client, nothing stored)"}},
		{name: "attach --dry-run with a bad value", args: attach("--dry-run=maybe"),
			wantCode: 2, wantErr: []string{`--dry-run "maybe": want none, client or server`}, errLines: 1},
		{name: "gc --dry-run with a bad value", args: gcArgs("--dry-run=maybe"),
			wantCode: 2, wantErr: []string{`--dry-run "maybe": want none, client or server`}, errLines: 1},
		{name: "serve --gc-dry-run with a bad value", args: []string{"serve", "--kubeconfig", kcfg, "--gc-dry-run=maybe"},
			wantCode: 2, wantErr: []string{`--gc-dry-run "maybe": want none, client or server`}, errLines: 1},
		{name: "attach -o yaml", args: attach("--dry-run", "-o", "yaml"),
			wantCode: 0, wantOut: []string{"dryRun: client", "cluster: in-cluster", "name: web-config"}},
		{name: "attach -o name", args: attach("--dry-run", "-o", "name"),
			wantCode: 0, wantFirst: "configmap/web-config"},
		{name: "attach -o wide shows where each name came from", args: attach("--dry-run", "-o", "wide"),
			wantCode: 0, wantOut: []string{"volume/cfg", "ReplicaSet/web-1"}},
		{name: "attach -l narrows discovery", args: attach("--dry-run", "-l", "configmap-attacher.io/revision=true,team=none"),
			wantCode: 0, wantOut: []string{"labels do not match the selector"}},
		{name: "attach -o with a bad value", args: attach("-o", "xml"),
			wantCode: 2, wantErr: []string{`--output "xml": want text, wide, json, yaml or name`}, errLines: 1},
		{name: "gc -o with a bad value", args: gcArgs("-o", "xml"),
			wantCode: 2, wantErr: []string{`--output "xml": want text, wide, json, yaml or name`}, errLines: 1},
		{name: "status -o with a bad value", args: []string{"status", "-o", "xml"},
			wantCode: 2, wantErr: []string{`--output "xml": want text, wide, json or yaml`}, errLines: 1},
		{name: "gc -o name lists only the revisions it would delete", args: gcArgs("-o", "name"),
			wantCode: 0, wantOut: []string{"configmap/old-config\n"}, noOut: []string{"configmap/web-config"}},
		{name: "gc -o wide adds who references and owns", args: gcArgs("-o", "wide"),
			wantCode: 0, wantOut: []string{"REFERENCED-BY", "OWNERS", "ReplicaSet/web-1"}},
		{name: "gc -o json: seconds, one type per field, the service's cluster name", args: gcArgs("-o", "json"),
			wantCode: 0, wantOut: []string{`"dryRun": "client"`, `"minAgeSeconds": 0`, `"cluster": "in-cluster"`, `"ageSeconds": `},
			noErr: []string{"error"}},
		{name: "gc on a namespace without revisions prints no empty table", args: []string{"gc", "--kubeconfig", kcfg, "-n", empty},
			wantCode: 0, wantFirst: "no opted-in revisions found", emptyErr: true},
		{name: "status -o yaml", args: []string{"status", "--kubeconfig", kcfg, "-n", ns, "-o", "yaml"},
			wantCode: 0, wantOut: []string{"cluster: in-cluster", "namespace: " + ns}},
		{name: "attach works in one cluster", args: attach("--cluster", "a", "--cluster", "b"),
			wantCode: 2, wantErr: []string{"--cluster: attach works in one cluster"}, errLines: 1},
		{name: "version", args: []string{"version"}, wantCode: 0, wantOut: []string{"configmap-attacher " + cli.Version}, emptyErr: true},
		{name: "--version says what version says", args: []string{"--version"}, wantCode: 0,
			wantOut: []string{"configmap-attacher " + cli.Version + " (go"}, emptyErr: true},
		{name: "version -o json", args: []string{"version", "-o", "json"}, wantCode: 0, wantOut: []string{`"version": "` + cli.Version + `"`}},
		{name: "a flag typo gets a suggestion", args: []string{"attach", "--namspace", ns},
			wantCode: 2, wantErr: []string{"unknown flag: --namspace (did you mean --namespace?)"}, errLines: 1},
		{name: "a flag typo on gc gets a suggestion", args: []string{"gc", "--dryrun"},
			wantCode: 2, wantErr: []string{"(did you mean --dry-run?)"}, errLines: 1},
		{name: "a long flag with one dash is named", args: []string{"gc", "-namespace", ns},
			wantCode: 2, wantErr: []string{"-namespace: long flags take two dashes: --namespace"}, errLines: 1},
		{name: "a subcommand typo gets a suggestion", args: []string{"stauts"},
			wantCode: 2, wantErr: []string{`unknown command "stauts" for "configmap-attacher" (did you mean status?)`}, errLines: 1},
		{name: "a kubeconfig that does not exist: attach", args: []string{"attach", "--kubeconfig", "/nonexistent", "--rollout", "x"},
			wantCode: 1, wantErr: []string{"/nonexistent"}, errLines: 1},
		{name: "a kubeconfig that does not exist: gc", args: []string{"gc", "--kubeconfig", "/nonexistent"},
			wantCode: 1, wantErr: []string{"/nonexistent"}, errLines: 1},
		{name: "a kubeconfig that does not exist: status", args: []string{"status", "--kubeconfig", "/nonexistent"},
			wantCode: 1, wantErr: []string{"/nonexistent"}, errLines: 1},
	})
	cm, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, "web-config", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, cm.OwnerReferences, "no dry run stored anything")
	_, err = kc.CoreV1().ConfigMaps(ns).Get(ctx, "old-config", metav1.GetOptions{})
	require.NoError(t, err, "gc's default is a dry run")
}

// Adoption and output (issue 18, third and fourth groups): existing, unlabelled config
// is shown with the exact fix; an object attached by name shows in status and is
// explained by gc; a reference to an object that does not exist is flagged; namespaces
// are apart; no colour when piped.
func TestFirstHourAdoption(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ctx := context.Background()
	kc := cp.Client()
	ns := newNamespace(t, cp)
	other := newNamespace(t, cp)
	kcfg := cp.Kubeconfig()
	for _, name := range []string{"app-config", "named-config"} { // existing config: no opt-in label
		_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := kc.CoreV1().ConfigMaps(other).Create(ctx, testfix.Revision(other, "other-config"), metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kc.CoreV1().ConfigMaps(ns).Create(ctx, testfix.Revision(ns, "unused-config"), metav1.CreateOptions{})
	require.NoError(t, err)
	testfix.CreateReplicaSet(t, kc, ns, "app-1", "app-config")
	testfix.CreateReplicaSet(t, kc, ns, "named-1", "named-config")
	testfix.CreateReplicaSet(t, kc, ns, "gone-1", "gone-config")
	status := []string{"status", "--kubeconfig", kcfg, "-n", ns}

	runTable(t, []dayOneCase{
		{name: "attach says a referenced object is not opted in, with the fix",
			args:     []string{"attach", "--kubeconfig", kcfg, "-n", ns, "--replicaset", "app-1"},
			wantCode: 0, emptyErr: true, wantOut: []string{"app-config", "skipped  (not opted in",
				"hint: the pod template references ConfigMap/app-config without the opt-in label",
				"kubectl label configmap -n " + ns + " app-config configmap-attacher.io/revision=true"}},
		{name: "attach by name needs no label",
			args:     []string{"attach", "--kubeconfig", kcfg, "-n", ns, "--replicaset", "named-1", "--configmaps", "named-config"},
			wantCode: 0, emptyErr: true, wantOut: []string{"named-config", "attached"}},
		{name: "status shows what is referenced but not opted in, per workload, with the fix", args: status,
			wantCode: 0, emptyErr: true, wantOut: []string{
				"ConfigMap app-config  referenced but not opted in (by ReplicaSet/app-1)",
				"kubectl label configmap -n " + ns + " app-config configmap-attacher.io/revision=true",
				"generatorOptions:\n      labels:\n        configmap-attacher.io/revision: \"true\"",
				"or in a Helm chart's ConfigMap template (the annotation when installed with helm upgrade, not through Argo CD):",
				"        configmap-attacher.io/revision: \"true\"\n      annotations:\n        helm.sh/resource-policy: keep"}},
		{name: "status shows an object attached by name without the label", args: status,
			wantCode: 0, wantOut: []string{"ConfigMap named-config  owned, by name (no opt-in label: gc never collects it)"}},
		{name: "status flags a reference to an object that does not exist", args: status,
			wantCode: 0, wantOut: []string{"ConfigMap gone-config  MISSING: referenced by ReplicaSet/gone-1 but does not exist"}},
		{name: "status -o json carries the fix and the flags", args: append(status, "-o", "json"),
			wantCode: 0, wantOut: []string{`"notOptedIn"`, `"dangling"`, `"byName": true`, `"optInFix"`, `"kubectl label configmap -n ` + ns}},
		{name: "status is not coloured when piped", args: status,
			wantCode: 0, noErr: []string{"\033["}},
		{name: "status is not coloured with NO_COLOR", args: status, env: map[string]string{"NO_COLOR": "1"},
			wantCode: 0},
		{name: "gc explains the object attached by name", args: []string{"gc", "--kubeconfig", kcfg, "-n", ns},
			wantCode: 0, emptyErr: true, wantOut: []string{"unused-config", "1 revision(s): 1 kept",
				"not swept: " + ns + "/ConfigMap/named-config: attached by name without the configmap-attacher.io/revision=true label"}},
		{name: "gc -o json lists it", args: []string{"gc", "--kubeconfig", kcfg, "-n", ns, "-o", "json"},
			wantCode: 0, wantOut: []string{`"attachedByName": [`, `"ConfigMap/named-config"`}},
		{name: "status keeps namespaces apart", args: []string{"status", "--kubeconfig", kcfg, "-A"},
			wantCode: 0, wantOut: []string{"\n\nNamespace: ", "Namespace: " + other + "\n"}},
	})
	code, out, _ := run(ctx, status...)
	require.Equal(t, 0, code)
	assert.NotContains(t, out, "\033[", "no colour when piped")
	t.Log("\n" + out)
}

// Pods of a ReplicaSet are folded under it (its ready/desired), not one tree per Pod; a
// bare Pod stays a workload of its own.
func TestStatusFoldsPodsUnderTheirReplicaSet(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	ctrl := true
	ref := []core.Ref{{Kind: core.KindConfigMap, Name: "cfg"}}
	snap := &gc.Snapshot{Namespace: "shop", Listed: map[schema.GroupKind]bool{}, Live: map[types.UID]bool{"rs": true, "p1": true, "p2": true, "bare": true},
		Workloads: []gc.Workload{
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs", Replicas: 2, ReadyReplicas: 2, Created: now, Refs: ref},
			{APIVersion: "v1", Kind: "Pod", Name: "web-1-a", UID: "p1", Refs: ref,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs", Controller: &ctrl}}},
			{APIVersion: "v1", Kind: "Pod", Name: "web-1-b", UID: "p2", Refs: ref,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs", Controller: &ctrl}}},
			{APIVersion: "v1", Kind: "Pod", Name: "debug", UID: "bare", Refs: ref},
		},
		Revisions: []gc.Revision{{Kind: core.KindConfigMap, Name: "cfg", UID: "c", Created: now, Labels: map[string]string{core.LabelRevision: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs"}}}}}
	for _, gk := range gc.WorkloadKinds {
		snap.Listed[gk] = true
	}
	plan, err := gc.PlanNamespace(snap, gc.Options{MinAge: time.Hour, Now: now})
	require.NoError(t, err)
	st := inspect.Build(snap, plan, []gc.Revision{}, false)
	var buf bytes.Buffer
	cli.RenderStatus(&buf, st, now)
	out := buf.String()
	assert.NotContains(t, out, "web-1-a", "folded: %s", out)
	assert.NotContains(t, out, "web-1-b")
	assert.Contains(t, out, "ReplicaSet web-1\n└── ReplicaSet web-1  ready:2/2")
	assert.Contains(t, out, "Pod debug\n└── ConfigMap cfg  used")
}

// Health and phase as `kubectl argo rollouts get` shows them: the Rollout's phase and
// message, each ReplicaSet's health and its role (stable, canary).
func TestStatusShowsHealthAsTheRolloutsPluginDoes(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ctx := context.Background()
	kc := cp.Client()
	dc := dynamic.NewForConfigOrDie(cp.RESTConfig())
	ns := newNamespace(t, cp)
	ro, err := dc.Resource(core.RolloutGVR).Namespace(ns).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": "web:2"}}}}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, unstructured.SetNestedField(ro.Object, map[string]any{"phase": "Paused", "message": "CanaryPauseStep",
		"stableRS": "aaa", "currentPodHash": "bbb"}, "status"))
	_, err = dc.Resource(core.RolloutGVR).Namespace(ns).UpdateStatus(ctx, ro, metav1.UpdateOptions{})
	require.NoError(t, err)
	for _, hash := range []string{"aaa", "bbb"} {
		rs := testfix.ReplicaSet("web-"+hash, "web-config-"+hash)
		rs.Labels = map[string]string{core.RolloutHashLabel: hash}
		rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "web", UID: ro.GetUID(), Controller: ptr(true)}}
		_, err := kc.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
		require.NoError(t, err)
		_, err = kc.CoreV1().ConfigMaps(ns).Create(ctx, testfix.Revision(ns, "web-config-"+hash), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	runTable(t, []dayOneCase{
		{name: "the Rollout's phase and message", args: []string{"status", "--kubeconfig", cp.Kubeconfig(), "-n", ns},
			wantCode: 0, emptyErr: true, wantOut: []string{"Rollout web  ॥ Paused  (CanaryPauseStep)",
				"ReplicaSet web-aaa  • ScaledDown  stable", "ReplicaSet web-bbb  • ScaledDown  canary"}},
		{name: "the same in JSON", args: []string{"status", "--kubeconfig", cp.Kubeconfig(), "-n", ns, "-o", "json"},
			wantCode: 0, wantOut: []string{`"health": "Paused"`, `"role": "stable"`, `"health": "ScaledDown"`}},
	})
}

// serve says once per object, not once per event, that a referenced ConfigMap is not
// opted in: two ReplicaSets using it and several resyncs of each leave one line.
func TestServeSaysNotOptedInOncePerObject(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ctx := context.Background()
	kc := cp.Client()
	ns := newNamespace(t, cp)
	_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	testfix.CreateReplicaSet(t, kc, ns, "a-1", "plain")
	testfix.CreateReplicaSet(t, kc, ns, "b-1", "plain")
	var errOut testfix.SyncBuffer
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(runCtx, []string{"serve", "--kubeconfig", cp.Kubeconfig(), "--grpc-addr", "-", "--http-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
			"--watch", "--watch-namespace", ns, "--watch-resync", "1s", "--log-level", "debug"},
			cli.Streams{In: strings.NewReader(""), Out: &errOut, Err: &errOut})
	}()
	controlplane.Eventually(t, 60*time.Second, "three events for each ReplicaSet", func() error {
		for _, rs := range []string{"a-1", "b-1"} {
			if n := strings.Count(errOut.String(), "replicaSet="+rs+" message="); n < 3 {
				return fmt.Errorf("%d events for %s", n, rs)
			}
		}
		return nil
	})
	cancel()
	<-done
	out := errOut.String()
	assert.Equal(t, 1, strings.Count(out, "referenced but not opted in"), "%s", out)
	assert.Contains(t, out, `fix="kubectl label configmap -n `+ns+` plain configmap-attacher.io/revision=true"`)
}

// serve's log: one line per HTTP request whatever the answer (bad input 400/413/415
// too), a refused event says why, and success carries no err=<nil>.
func TestServeLogsOneLinePerRequestWithTheReason(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ctx := context.Background()
	ns := newNamespace(t, cp)
	testfix.CreateReplicaSet(t, cp.Client(), ns, "ok-1", "ok-config")
	var errOut testfix.SyncBuffer
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(runCtx, []string{"serve", "--kubeconfig", cp.Kubeconfig(), "--grpc-addr", "-", "--http-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
			"--max-body-bytes", "1024", "--log-level", "debug"}, cli.Streams{In: strings.NewReader(""), Out: &errOut, Err: &errOut})
	}()
	var addr string
	controlplane.Eventually(t, 60*time.Second, "serve to listen", func() error {
		m := regexp.MustCompile(`msg=serving .*http=(\S+)`).FindStringSubmatch(errOut.String())
		if m == nil {
			return fmt.Errorf("not yet: %s", errOut.String())
		}
		addr = m[1]
		return nil
	})
	rs := func(name string) string {
		return `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"namespace":"` + ns + `","name":"` + name + `"}}`
	}
	for _, tc := range []struct {
		name, ctype, body string
		code              int
		line              string
	}{
		{"ok", "application/json", rs("ok-1"), 200, "result=ok"},
		{"refused", "application/json", rs("gone-1"), 409, "result=refused"},
		{"bad json", "application/json", "{", 400, "result=invalid"},
		{"too large", "application/json", `{"x":"` + strings.Repeat("x", 2048) + `"}`, 413, "result=invalid"},
		{"wrong type", "text/plain", "hello", 415, "result=invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The HTTP path's lines only: the revision-side watch logs its own events.
			before := strings.Count(errOut.String(), "msg=event path=http")
			resp, err := http.Post("http://"+addr+"/", tc.ctype, strings.NewReader(tc.body))
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, tc.code, resp.StatusCode)
			lines := strings.Split(errOut.String(), "\n")
			var events []string
			for _, l := range lines {
				if strings.Contains(l, "msg=event path=http") {
					events = append(events, l)
				}
			}
			require.Len(t, events, before+1, "one line per request: %s", errOut.String())
			last := events[len(events)-1]
			assert.Contains(t, last, tc.line)
			assert.NotContains(t, last, "err=<nil>")
			if tc.name == "refused" {
				assert.Contains(t, last, "does not exist", "the reason")
				assert.NotContains(t, last, "no config objects referenced")
			}
		})
	}
	cancel()
	<-done
}
