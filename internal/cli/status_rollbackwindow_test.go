package cli_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/inspect"
)

// status shows a workload's warnings (a Rollout's rollbackWindow past its
// revisionHistoryLimit) as a line under the workload.
func TestStatusShowsARolloutsRollbackWindowWarningUnderIt(t *testing.T) {
	note := "spec.rollbackWindow.revisions 3 is larger than spec.revisionHistoryLimit 1: a rollback inside the window can reach a ReplicaSet whose config is gone"
	rep := inspect.Report{Namespace: "shop", Workloads: []inspect.WorkloadStatus{{Kind: core.RolloutKind, Name: "web", Warnings: []string{note}}}}
	var buf bytes.Buffer
	cli.RenderStatus(&buf, rep, time.Now())
	lines := strings.Split(buf.String(), "\n")
	assert.Equal(t, "Rollout web", lines[1])
	assert.Equal(t, "└── WARNING "+note, lines[2])
}
