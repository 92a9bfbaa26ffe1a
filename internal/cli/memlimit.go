package cli

import (
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryLimitEnv carries the container's memory limit in bytes: the chart and the
// Kustomize base set it from resources.limits.memory.
const memoryLimitEnv = "CONFIGMAP_ATTACHER_MEMORY_LIMIT"

// memoryLimitShare of the container's limit becomes the Go runtime's soft memory limit;
// the rest is headroom for what the runtime does not count (the binary's mapped pages,
// memory not yet returned to the system), so the runtime collects harder before the
// kernel's OOM killer acts.
const memoryLimitShare = 0.9

// softMemoryLimit is the runtime's soft memory limit serve sets: memoryLimitShare of
// $CONFIGMAP_ATTACHER_MEMORY_LIMIT, or 0 (none) when that is unset or GOMEMLIMIT is
// set (an explicit GOMEMLIMIT wins).
func softMemoryLimit(getenv func(string) string) (int64, error) {
	raw := strings.TrimSpace(getenv(memoryLimitEnv))
	if raw == "" || getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q: want the memory limit in bytes", memoryLimitEnv, raw)
	}
	return int64(float64(n) * memoryLimitShare), nil
}

// applyMemoryLimit sets the runtime's soft memory limit (softMemoryLimit) and returns it.
func applyMemoryLimit(getenv func(string) string) (int64, error) {
	limit, err := softMemoryLimit(getenv)
	if err != nil || limit == 0 {
		return 0, err
	}
	debug.SetMemoryLimit(limit)
	return limit, nil
}
