package argorollouts

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Promote writes what the kubectl-argo-rollouts plugin writes for the Rollout it reads.
func TestPromotePatchesAsThePluginDoes(t *testing.T) {
	steps := []any{map[string]any{"setWeight": int64(25)}, map[string]any{"pause": map[string]any{}}}
	tests := []struct {
		name   string
		status map[string]any
		steps  []any
		want   string
	}{
		{name: "paused at a step: the pause condition cleared", steps: steps,
			status: map[string]any{"currentStepIndex": int64(1), "pauseConditions": []any{map[string]any{"reason": "CanaryPauseStep"}}},
			want:   `{"status":{"pauseConditions":null}}`},
		{name: "at the pause step before the controller wrote its condition: the step skipped", steps: steps,
			status: map[string]any{"currentStepIndex": int64(1)}, want: `{"status":{"pauseConditions":null,"currentStepIndex":2}}`},
		{name: "no index yet: step 0 skipped", steps: steps, status: map[string]any{},
			want: `{"status":{"pauseConditions":null,"currentStepIndex":1}}`},
		{name: "past the last step: the index stays", steps: steps, status: map[string]any{"currentStepIndex": int64(2)},
			want: `{"status":{"pauseConditions":null,"currentStepIndex":2}}`},
		{name: "no canary steps (blue-green): only the conditions", status: map[string]any{}, want: `{"status":{"pauseConditions":null}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ro := &unstructured.Unstructured{Object: map[string]any{"status": tc.status, "spec": map[string]any{}}}
			if tc.steps != nil {
				ro.Object["spec"] = map[string]any{"strategy": map[string]any{"canary": map[string]any{"steps": tc.steps}}}
			}
			assert.JSONEq(t, tc.want, string(promoteStatusPatch(ro)))
		})
	}
}
