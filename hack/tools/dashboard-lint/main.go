// Command dashboard-lint checks a Grafana dashboard JSON for Prometheus the way Grafana's
// dashboard-linter does (its rules, by the same names), on Grafana's own schema: the
// dashboard must decode strictly with the Grafana Foundation SDK's generated types (an
// unknown or mistyped field fails) and every query must parse with Prometheus' PromQL parser.
// Grafana's dashboard-linter itself is not on the Go module proxy, hence this tool.
//
//	dashboard-lint [-metrics FILE] DASHBOARD.json...
//
// -metrics names a file of known metric names, one a line: a query naming another fails.
// Findings go to stdout, one a line; the exit code is 1 if there are any.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	metricsFile := flag.String("metrics", "", "file of the metric names a query may use, one a line")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: dashboard-lint [-metrics FILE] DASHBOARD.json...")
		os.Exit(2)
	}
	known, err := readNames(*metricsFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	failed := false
	for _, path := range flag.Args() {
		raw, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		for _, f := range Lint(raw, known) {
			fmt.Printf("%s: %s\n", path, f)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

// readNames reads a file of names, one a line ("" reads nothing: every name is known).
func readNames(path string) (map[string]bool, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if n := strings.TrimSpace(sc.Text()); n != "" && !strings.HasPrefix(n, "#") {
			names[n] = true
		}
	}
	return names, sc.Err()
}
