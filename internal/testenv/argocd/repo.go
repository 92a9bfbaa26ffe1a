package argocd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Repo is a local Git repository Argo CD reads through a file:// URL; tests commit to it.
type Repo struct {
	dir string
	mu  sync.Mutex // one commit at a time
}

// NewRepo creates an empty repository (branch main) in dir.
func NewRepo(ctx context.Context, dir string) (*Repo, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	r := &Repo{dir: dir}
	if _, err := r.git(ctx, "init", "--quiet", "--initial-branch=main"); err != nil {
		return nil, err
	}
	return r, nil
}

// URL is the repository's file:// URL.
func (r *Repo) URL() string { return "file://" + r.dir }

// Dir is the repository's work tree.
func (r *Repo) Dir() string { return r.dir }

// Commit writes files (path relative to the repository -> content), removes the paths
// in remove, commits everything and returns the commit's SHA.
func (r *Repo) Commit(ctx context.Context, msg string, files map[string]string, remove ...string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, content := range files {
		full, err := r.path(p)
		if err != nil {
			return "", err
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			return "", err
		}
		if err := os.WriteFile(full, []byte(content), 0o600); err != nil {
			return "", err
		}
	}
	for _, p := range remove {
		full, err := r.path(p)
		if err != nil {
			return "", err
		}
		if err := os.RemoveAll(full); err != nil {
			return "", err
		}
	}
	if _, err := r.git(ctx, "add", "--all"); err != nil {
		return "", err
	}
	if _, err := r.git(ctx, "commit", "--quiet", "--allow-empty", "-m", msg); err != nil {
		return "", err
	}
	sha, err := r.git(ctx, "rev-parse", "HEAD")
	return strings.TrimSpace(sha), err
}

// Tag tags the current commit (a release's tag, which the shipped Applications pin).
func (r *Repo) Tag(ctx context.Context, name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err := r.git(ctx, "tag", "--", name)
	return err
}

// path resolves p inside the work tree, refusing paths that leave it.
func (r *Repo) path(p string) (string, error) {
	full := filepath.Join(r.dir, p)
	if rel, err := filepath.Rel(r.dir, full); err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("path %q is not inside the repository", p)
	}
	return full, nil
}

func (r *Repo) git(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com", "GIT_CONFIG_NOSYSTEM=1")
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out.String(), nil
}
