// Package layout's test holds the package map of docs/design.md against the code: what
// may import what, and what the shipped binary links. It reads the import graph with
// `go list`, so it needs the go command (it is there wherever the tests build).
package layout

import (
	"bufio"
	"bytes"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

const module = "github.com/configmap-attacher/configmap-attacher/"

// The ways in: each is a thin adapter over the dispatcher and imports no other.
var transports = []string{"trigger", "internal/ingress/eventbus", "internal/ingress/watch"}

// Transport libraries: the core, the sweep and the dispatcher use none of them.
var transportLibs = []string{"google.golang.org/grpc", "github.com/nats-io/", "net/http", "github.com/cloudevents/sdk-go/v2/protocol"}

// The harness wings: the local test environment (real components started as processes),
// the developer's tools (demo, dev CLI, benchmarks) and the end-to-end suites. Never
// linked into the shipped binary, never imported by a product package.
var harness = []string{"internal/testenv/", "internal/dev/", "internal/e2e/", "github.com/nats-io/nats-server"}

// Commands of the harness: the only non-harness packages that may import it.
var harnessCommands = []string{"cmd/configmap-attacher-dev", "bench/cmd/"}

// imports returns every package of the module with its direct imports (tests excluded).
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out := goList(t, "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "./...")
	graph := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 {
			graph[strings.TrimPrefix(f[0], module)] = f[1:]
		}
	}
	return graph
}

func goList(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func hasPrefix(s string, prefixes []string) (string, bool) {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) || strings.HasPrefix(s, module+p) {
			return p, true
		}
	}
	return "", false
}

func TestTheCoreTheSweepAndTheDispatcherImportNoTransport(t *testing.T) {
	graph := imports(t)
	for _, pkg := range []string{"internal/core", "internal/gc", "internal/dispatch", "internal/event", "internal/inspect"} {
		for _, imp := range graph[pkg] {
			if p, bad := hasPrefix(imp, append(transports, transportLibs...)); bad {
				t.Errorf("%s imports %s (%s): it must stay free of transports", pkg, imp, p)
			}
		}
	}
}

// The command line (flags, rendering, exit codes): internal/inspect computes what status
// shows and leaves the printing to internal/cli.
var commandLine = []string{"internal/cli", "internal/server", "github.com/spf13/"}

func TestTheStatusModelImportsNoCommandLine(t *testing.T) {
	for _, imp := range imports(t)["internal/inspect"] {
		if p, bad := hasPrefix(imp, commandLine); bad {
			t.Errorf("internal/inspect imports %s (%s): it reads the cluster, internal/cli prints", imp, p)
		}
	}
}

func TestNoTransportImportsAnother(t *testing.T) {
	graph := imports(t)
	for _, tr := range transports {
		for _, imp := range graph[tr] {
			if p, bad := hasPrefix(imp, transports); bad && p != tr {
				t.Errorf("way in %s imports way in %s: each is an adapter over internal/dispatch only", tr, imp)
			}
		}
	}
}

func TestTheShippedBinaryLinksNoHarness(t *testing.T) {
	out := goList(t, "list", "-deps", "./cmd/configmap-attacher")
	for _, dep := range strings.Fields(string(out)) {
		if p, bad := hasPrefix(dep, harness); bad {
			t.Errorf("cmd/configmap-attacher links %s (%s): the development harness must stay out of the shipped binary", dep, p)
		}
	}
}

func TestNoProductPackageImportsTheHarness(t *testing.T) {
	for pkg, imps := range imports(t) {
		if _, h := hasPrefix(pkg, append(harness, harnessCommands...)); h || pkg == "internal/layout" {
			continue
		}
		for _, imp := range imps {
			if p, bad := hasPrefix(imp, harness); bad {
				t.Errorf("product package %s imports %s (%s): the harness serves tests and dev commands only", pkg, imp, p)
			}
		}
	}
}

// roundNamed matches test files named after a review round or session ("breaker_s5_x",
// "x_round2_test.go", "s7_x_test.go") instead of the behaviour they prove.
var roundNamed = regexp.MustCompile(`(?i)(^|_)(s\d+|round\d*|review\d*|breaker)(_|\.|$)`)

func TestTestFilesAreNamedAfterBehaviour(t *testing.T) {
	out := goList(t, "list", "-f", `{{.Dir}} {{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}`, "./...")
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		for _, name := range f[min(1, len(f)):] {
			if roundNamed.MatchString(strings.TrimSuffix(name, "_test.go")) {
				t.Errorf("%s/%s is named after a review round: name it after the behaviour it proves", f[0], name)
			}
		}
	}
}
