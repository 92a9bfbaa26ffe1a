package deploytest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// toolBin is the path of a pinned real tool in the repository's bin/ (make tools, or
// hack/tools/build.sh NAME). Missing, the test fails, or with -short (make unit) is skipped.
func toolBin(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(repoRoot(t), "bin", name)
	if _, err := os.Stat(p); err != nil {
		if testing.Short() {
			t.Skipf("bin/%s is not built (hack/tools/build.sh %s)", name, name)
		}
		t.Fatalf("bin/%s is not built: run hack/tools/build.sh %s (make tools builds it)", name, name)
	}
	return p
}

// runTool runs bin/NAME with args and returns its combined output and error.
func runTool(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, toolBin(t, name), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// tempFile writes body to a file in a fresh temporary directory and returns its path.
func tempFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
