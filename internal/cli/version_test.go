package cli_test

import (
	"context"
	"strings"
	"testing"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
)

// TestVersionPrintsTheReleaseAndTheCommit: `version` (and -o json) print the version and
// the commit stamped at build time (make build, make release, the Dockerfile).
func TestVersionPrintsTheReleaseAndTheCommit(t *testing.T) {
	oldV, oldC := cli.Version, cli.Commit
	t.Cleanup(func() { cli.Version, cli.Commit = oldV, oldC })
	cli.Version, cli.Commit = "1.2.3", "0123456789ab"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"version"}, "configmap-attacher 1.2.3 (go"},
		{[]string{"version"}, "commit 0123456789ab)"},
		{[]string{"version", "-o", "json"}, `"commit": "0123456789ab"`},
		{[]string{"version", "-o", "json"}, `"version": "1.2.3"`},
	} {
		code, out, errOut := run(context.Background(), tc.args...)
		if code != 0 || !strings.Contains(out, tc.want) || errOut != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %q", tc.args, code, out, errOut, tc.want)
		}
	}
}
