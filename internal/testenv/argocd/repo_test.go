package argocd_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argocd"
)

// TestRepoCommitsInsideItsWorkTreeOnly: Commit writes and removes files inside the
// repository and returns a new commit each time; a path that leaves the work tree is
// refused and nothing is committed.
func TestRepoCommitsInsideItsWorkTreeOnly(t *testing.T) {
	ctx := context.Background()
	r, err := argocd.NewRepo(ctx, filepath.Join(t.TempDir(), "git"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := r.Commit(ctx, "one", map[string]string{"a/b.yaml": "x: 1"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := r.Commit(ctx, "two", nil, "a/b.yaml")
	if err != nil || second == first || len(second) != 40 {
		t.Fatalf("second commit %q (first %q): %v", second, first, err)
	}
	if _, err := os.Stat(filepath.Join(r.Dir(), "a/b.yaml")); !os.IsNotExist(err) {
		t.Fatalf("removed file still there: %v", err)
	}
	for _, bad := range []string{"../escape.yaml", ".", "a/../../x"} {
		t.Run(bad, func(t *testing.T) {
			if _, err := r.Commit(ctx, "bad", map[string]string{bad: "x"}); err == nil {
				t.Fatalf("path %q accepted", bad)
			}
			if _, err := r.Commit(ctx, "bad", nil, bad); err == nil {
				t.Fatalf("removal of %q accepted", bad)
			}
		})
	}
	if got := r.URL(); got != "file://"+r.Dir() {
		t.Fatalf("URL %q", got)
	}
}
