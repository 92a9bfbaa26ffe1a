package cli_test

import (
	"context"
	"path/filepath"
	"testing"
)

// Odd values of the shared vocabulary are usage errors (exit 2, docs/cli.md "Exit
// codes") found before anything is contacted: KUBECONFIG points nowhere, so a command
// that got as far as connecting would exit 1 instead.
func TestOddInputIsUsageErrorBeforeContact(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
	t.Setenv("IS_IN_CLUSTER", "false")
	for _, args := range [][]string{
		{"gc", "--dry-run", "server"}, // space-separated: bare --dry-run is client, "server" a stray argument
		{"gc", "--dry-run=True"},
		{"gc", "--dry-run=maybe"},
		{"gc", "-o", "JSON"},
		{"gc", "-o", "yml"},
		{"status", "-o", "name"},
		{"version", "-o", "wide"},
		{"attach", "--rollout", "r", "-n", "ns", "--dry-run=srv"},
		{"attach", "--rollout", "r", "-n", "ns", "-o", "table2"},
		{"attach", "--rollout", "r", "-n", "ns", "extra"},
		{"attach", "--rollout", "r", "--deployment", "d", "-n", "ns"},
		{"-rollout", "r", "-namespace", "ns", "-configmaps", "a,b", "extra"},
		{"-rollout", "r", "-namespace", "ns", "-configmaps", "a,b", "--", "extra"},
		{"-rollout", "r", "-namespace", "ns", "-configmaps", "a,b", "-dry-run"},
		{"-rollout", "r", "-namespace", "ns", "-configmaps", "A_b"},
		{"-rollout", "r", "-namespace", "ns", "-configmaps", "a,b", "-timeout", "-1s"},
		{"-rollout", "r", "-namespace", "ns", "-configmaps", "a,b", "-timeout", "soon"},
		{"-rollout", "", "-namespace", "ns", "-configmaps", "a"},
		{"-rollout", "r", "-configmaps", "a"},
		{"-rollout=r", "-namespace=ns", "-configmaps=a", "-v=maybe"},
	} {
		code, out, errOut := run(context.Background(), args...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2 (usage)\nstdout %s\nstderr %s", args, code, out, errOut)
		}
	}
}
