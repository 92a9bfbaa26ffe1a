package cli_test

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testfix"
)

// dayOneCase is one row of a first-hour friction: the command, its exit code, and
// what stdout and stderr must (and must not) say.
type dayOneCase struct {
	name      string
	args      []string
	env       map[string]string
	wantCode  int
	wantOut   []string
	wantErr   []string
	noErr     []string
	errLines  int // when > 0, exactly this many lines on stderr
	emptyErr  bool
	emptyOut  bool
	wantFirst string // the first line of stdout
}

func (tc dayOneCase) check(t *testing.T, code int, out, errOut string) {
	t.Helper()
	assert.Equal(t, tc.wantCode, code, "stdout: %s\nstderr: %s", out, errOut)
	for _, w := range tc.wantOut {
		assert.Contains(t, out, w)
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
			args:     []string{"attach", "--kubeconfig", kcfg, "-n", ns, "--replicaset", "web-2", "--timeout", "2s"},
			wantCode: 1, wantErr: []string{"waiting for ReplicaSet " + ns + "/web-2 (", `"web-2" not found`, "timed out"}},
		{name: "the old form says what it still waits for",
			args: []string{"-rollout", "nope", "-namespace", ns, "-configmaps", "web-config", "-timeout", "2s"}, env: legacyEnv,
			wantCode: 1, wantErr: []string{"waiting for Rollout " + ns + "/nope (", "timed out"}},
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
				done <- cli.Main(ctx, []string{"attach", "--kubeconfig", cp.Kubeconfig(), "-n", ns, "--replicaset", "never", "--timeout", "10m"},
					cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
			}()
			controlplane.Eventually(t, 60*time.Second, "the command is waiting", func() error {
				if !strings.Contains(errb.String(), "waiting for ReplicaSet") {
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
