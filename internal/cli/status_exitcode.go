package cli

import (
	"fmt"
	"strings"

	"github.com/configmap-attacher/configmap-attacher/internal/inspect"
)

// ExitMissingConfig is what `status --exit-code` exits with when a live workload
// references config that does not exist (the MISSING lines): a new Pod of it cannot
// start (CreateContainerConfigError). Like `kubectl diff`, which exits 1 on a difference
// and above 1 on an error, the finding has a code of its own: failures stay 1, usage
// errors 2 (docs/cli.md, "Exit codes").
const ExitMissingConfig = 3

// missingConfigError is status --exit-code's finding: the MISSING config, one
// "Kind namespace/name (used by Kind/name, ...)" per object.
type missingConfigError struct{ missing []string }

func (e missingConfigError) Error() string {
	return fmt.Sprintf("MISSING config (status --exit-code): %s; a new Pod of these cannot start", strings.Join(e.missing, "; "))
}

// missingConfig lists the MISSING config of the reports (inspect.WorkloadStatus.Dangling),
// prefixed with the cluster's name when there are several.
func missingConfig(perCluster [][]inspect.Report, multi bool) []string {
	var out []string
	for _, reps := range perCluster {
		for _, rep := range reps {
			for _, w := range rep.Workloads {
				for _, d := range w.Dangling {
					where := ""
					if multi {
						where = "cluster " + rep.Cluster + ": "
					}
					out = append(out, fmt.Sprintf("%s%s %s/%s (used by %s)", where, d.Kind, rep.Namespace, d.Name, strings.Join(d.UsedBy, ", ")))
				}
			}
		}
	}
	return out
}

// exitCodeResult is status's result with --exit-code: failed when the status could not
// be read, else the MISSING config as a missingConfigError, else nil.
func exitCodeResult(failed error, missing []string) error {
	if failed != nil || len(missing) == 0 {
		return failed
	}
	return missingConfigError{missing}
}
