package controlplane

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
)

// RolloutsEnv selects the Argo Rollouts version a control plane with Options.Workloads
// runs (and whose CRDs it installs) when Options.Rollouts is empty: "v1.8" (default) or
// "v1.10" (make test-rollouts-1.10).
const RolloutsEnv = "CONFIGMAP_ATTACHER_ROLLOUTS"

// DefaultRollouts is the Argo Rollouts version used when neither Options.Rollouts nor
// $CONFIGMAP_ATTACHER_ROLLOUTS names one.
const DefaultRollouts = "v1.8"

// RolloutsRelease is one Argo Rollouts version the harness can run: its controller
// binary in ./bin and the pinned tools module its CRDs are read from.
type RolloutsRelease struct {
	// Version is the setting's value ("v1.8", "v1.10").
	Version string
	// Binary is the controller's file name in the bin directory (hack/tools/build.sh NAME).
	Binary string
	// ToolsDir is the folder, relative to the repository root, whose go.mod pins the
	// argo-rollouts module the CRDs come from.
	ToolsDir string
	// Toolchain is the GOTOOLCHAIN the go command needs in ToolsDir ("" for the local
	// one); ToolchainEnv, when set in the environment, overrides it (as in build.sh).
	Toolchain, ToolchainEnv string
}

// RolloutsReleases are the Argo Rollouts versions the acceptance scenarios are proven on.
var RolloutsReleases = map[string]RolloutsRelease{
	"v1.8": {Version: "v1.8", Binary: "rollouts-controller", ToolsDir: "hack/tools/crds"},
	// v1.10 declares go 1.26.10: its module is read with the toolchain build.sh builds it with.
	"v1.10": {Version: "v1.10", Binary: "rollouts-controller-1.10", ToolsDir: "hack/tools/rollouts-1.10",
		Toolchain: "go1.27.3", ToolchainEnv: "ROLLOUTS_1_10_GOTOOLCHAIN"},
}

// ResolveRollouts returns the release named by version, else by $CONFIGMAP_ATTACHER_ROLLOUTS,
// else DefaultRollouts. An unknown name is an error listing the known ones.
func ResolveRollouts(version string) (RolloutsRelease, error) {
	from := "Options.Rollouts"
	if version == "" {
		version, from = os.Getenv(RolloutsEnv), "$"+RolloutsEnv
	}
	if version == "" {
		version = DefaultRollouts
	}
	if r, ok := RolloutsReleases[version]; ok {
		return r, nil
	}
	known := make([]string, 0, len(RolloutsReleases))
	for v := range RolloutsReleases {
		known = append(known, v)
	}
	sort.Strings(known)
	return RolloutsRelease{}, fmt.Errorf("controlplane: %s=%q is not a known Argo Rollouts version (known: %s)", from, version, strings.Join(known, ", "))
}

// toolchainEnv is the GOTOOLCHAIN setting for the go command in r.ToolsDir, or nil.
func (r RolloutsRelease) toolchainEnv() []string {
	tc := r.Toolchain
	if r.ToolchainEnv != "" && os.Getenv(r.ToolchainEnv) != "" {
		tc = os.Getenv(r.ToolchainEnv)
	}
	if tc == "" {
		return nil
	}
	return []string{"GOTOOLCHAIN=" + tc}
}

// workloadBinaries are the binaries Options.Workloads starts with release r.
func workloadBinaries(r RolloutsRelease) []string {
	out := slices.Clone(WorkloadBinaries)
	for i, b := range out {
		if b == "rollouts-controller" {
			out[i] = r.Binary
		}
	}
	return out
}
