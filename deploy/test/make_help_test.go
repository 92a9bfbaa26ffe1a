package deploytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// documentedTarget is a Makefile rule with a "## description": a target `make help` lists.
var documentedTarget = regexp.MustCompile(`(?m)^([^\s#=:]+):[^=\n]*## `)

// TestMakeHelpListsEveryDocumentedTarget: the README says `make help` lists every target;
// every rule with a "##" description is in its output, whatever characters its name has
// (test-rollouts-1.10).
func TestMakeHelpListsEveryDocumentedTarget(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	root := repoRoot(t)
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-s", "--no-print-directory", "help")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make help: %v", err)
	}
	listed := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			listed[f[0]] = true
		}
	}
	targets := documentedTarget.FindAllStringSubmatch(string(b), -1)
	if len(targets) == 0 {
		t.Fatal("no documented target found in the Makefile")
	}
	for _, m := range targets {
		if !listed[m[1]] {
			t.Errorf("make help does not list %s:\n%s", m[1], out)
		}
	}
}
