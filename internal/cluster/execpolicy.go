package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// ErrExecNotAllowed: a cluster Secret names a credential plugin the operator did not
// allow (serve --allow-exec-plugin). The plugin is never run.
var ErrExecNotAllowed = errors.New("credential plugin not allowed")

// DefaultExecTimeout bounds one run of a credential plugin.
const DefaultExecTimeout = 20 * time.Second

// ExecPolicy is the operator's allow-list of credential plugins (Argo CD's
// execProviderConfig) that cluster Secrets may name. The zero value (and nil) allows
// none: a Secret naming a plugin is refused with ErrExecNotAllowed.
//
// An entry is an absolute path or a bare command name. A bare name is resolved once,
// when the policy is built, through the service's own $PATH (never a Secret's env):
// a Secret may then name the command by that bare name or by the resolved path, and
// the resolved path is what runs. An absolute entry also lets a Secret use its bare name
// when the service's $PATH resolves that name to the same file (Argo CD's Secrets say
// "aws", the operator allows "/usr/local/bin/aws"). Relative paths ("./x", "bin/x") are refused, and so
// is any entry that is this program's own executable: a Secret must never start the
// service's own one-shot commands.
type ExecPolicy struct {
	// byName maps what a Secret may write (bare name or absolute path) to the absolute
	// path that runs.
	byName map[string]string
	// Timeout bounds one run (DefaultExecTimeout when zero).
	Timeout time.Duration
}

// NewExecPolicy builds the allow-list from the flag's entries; self is this program's
// executable (os.Executable; "" skips that check). Errors name the entry.
func NewExecPolicy(entries []string, timeout time.Duration, self string) (*ExecPolicy, error) {
	p := &ExecPolicy{byName: map[string]string{}, Timeout: timeout}
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		resolved, err := resolvePlugin(e)
		if err != nil {
			return nil, err
		}
		if self != "" && samePath(resolved, self) {
			return nil, fmt.Errorf("credential plugin %q is this program's own executable: a cluster Secret must never run configmap-attacher", e)
		}
		p.byName[e] = resolved
		p.byName[resolved] = resolved
		if base := filepath.Base(resolved); filepath.IsAbs(e) {
			if onPath, err := exec.LookPath(base); err == nil && samePath(onPath, resolved) {
				p.byName[base] = resolved
			}
		}
	}
	return p, nil
}

func resolvePlugin(e string) (string, error) {
	switch {
	case filepath.IsAbs(e):
		return filepath.Clean(e), nil
	case strings.ContainsRune(e, '/') || strings.ContainsRune(e, filepath.Separator):
		return "", fmt.Errorf("credential plugin %q: give an absolute path or a bare command name, not a relative path", core.Clip(e))
	}
	path, err := exec.LookPath(e)
	if err != nil {
		return "", fmt.Errorf("credential plugin %q: not found in $PATH: %w", core.Clip(e), err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("credential plugin %q: %w", e, err)
	}
	return abs, nil
}

// samePath reports whether a and b are one file (following symlinks), or equal paths
// when either cannot be read.
func samePath(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA != nil || errB != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return os.SameFile(fa, fb)
}

// Allowed returns the entries of the allow-list as the operator may write them, sorted.
func (p *ExecPolicy) Allowed() []string {
	if p == nil {
		return nil
	}
	out := make([]string, 0, len(p.byName))
	for k := range p.byName {
		out = append(out, k)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// resolve returns the absolute path to run for the command a Secret names, or an
// error wrapping ErrExecNotAllowed.
func (p *ExecPolicy) resolve(command string) (string, error) {
	if p != nil {
		if path, ok := p.byName[command]; ok {
			return path, nil
		}
	}
	allowed := "none is allowed; serve --allow-exec-plugin names the allowed commands"
	if l := p.Allowed(); len(l) > 0 {
		allowed = "allowed: " + strings.Join(l, ", ")
	}
	return "", fmt.Errorf("%w: %q (%s)", ErrExecNotAllowed, core.Clip(command), allowed)
}

func (p *ExecPolicy) timeout() time.Duration {
	if p == nil || p.Timeout <= 0 {
		return DefaultExecTimeout
	}
	return p.Timeout
}

// unsafePluginEnv reports whether a Secret may not set the plugin environment variable
// name: one that is not an identifier ([A-Za-z_][A-Za-z0-9_]*: bash imports
// "BASH_FUNC_name%%" as a function that replaces a command), the dynamic loader's
// (LD_*, DYLD_*), which would make an allowed command load other code, a shell's
// startup variables (BASH_ENV, ENV, SHELLOPTS, BASHOPTS, PS4), which make a plugin that
// is or calls a shell script run code of the Secret's choosing, and
// KUBERNETES_EXEC_INFO, which the service sets itself (docs/safety.md, rule 12).
func unsafePluginEnv(name string) bool {
	if !envIdentifier(name) {
		return true
	}
	switch name {
	case ExecInfoEnv, "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "PS4":
		return true
	}
	return strings.HasPrefix(name, "LD_") || strings.HasPrefix(name, "DYLD_") || strings.HasPrefix(name, "BASH_FUNC_")
}

// envIdentifier reports whether name is a portable environment variable name.
func envIdentifier(name string) bool {
	for i, r := range name {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return name != ""
}
