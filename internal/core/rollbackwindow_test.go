package core_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"

	"github.com/configmap-attacher/configmap-attacher/internal/cache"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

func rolloutSpec(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
}

func TestRollbackWindowIsReportedOnlyWhenItReachesPastTheHistoryLimit(t *testing.T) {
	window := func(n int64) map[string]any { return map[string]any{"revisions": n} }
	tests := []struct {
		name string
		spec map[string]any
		want string // "" or a substring
	}{
		{"no rollbackWindow", map[string]any{"revisionHistoryLimit": int64(1)}, ""},
		{"window inside the limit", map[string]any{"revisionHistoryLimit": int64(3), "rollbackWindow": window(3)}, ""},
		{"window past the limit", map[string]any{"revisionHistoryLimit": int64(1), "rollbackWindow": window(3)},
			"spec.rollbackWindow.revisions 3 is larger than spec.revisionHistoryLimit 1: a rollback inside the window can reach a ReplicaSet whose config is gone"},
		{"limit 0", map[string]any{"revisionHistoryLimit": int64(0), "rollbackWindow": window(1)}, "set revisionHistoryLimit to at least 1"},
		{"unset limit is the controller's 10", map[string]any{"rollbackWindow": window(10)}, ""},
		{"past the default limit", map[string]any{"rollbackWindow": window(11)}, "spec.revisionHistoryLimit 10"},
		{"window 0 is off", map[string]any{"revisionHistoryLimit": int64(0), "rollbackWindow": window(0)}, ""},
		{"not a number", map[string]any{"revisionHistoryLimit": int64(0), "rollbackWindow": map[string]any{"revisions": "3"}}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := core.RollbackWindowNote(rolloutSpec(tc.spec))
			if tc.want == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tc.want)
		})
	}
}

// An attach to a ReplicaSet of a Rollout whose rollbackWindow reaches past its
// revisionHistoryLimit, read from the service's cache, reports it in the result and
// records one Warning Event on the Rollout; a replay (nothing to write) reports it
// again and records nothing.
func TestRollbackWindowBeyondHistoryIsReportedWhenAttaching(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ro := e.rollout("web", nil)
	ro.Object["spec"].(map[string]any)["revisionHistoryLimit"] = int64(1)
	ro.Object["spec"].(map[string]any)["rollbackWindow"] = map[string]any{"revisions": int64(3)}
	ro, err := e.dc.Resource(core.RolloutGVR).Namespace(e.ns).Update(ctx, ro, metav1.UpdateOptions{})
	require.NoError(t, err)
	e.revision("web-config-1")
	rs := e.replicaSet("web-1", ptr(rolloutOwner(ro)), podTemplate("web", "web-config-1"))

	_, c := e.cachedAttacherWith(cache.Options{})
	events := record.NewFakeRecorder(10)
	events.IncludeObject = true
	a, err := core.NewAttacher(core.Config{Cluster: "local", Client: e.kc, Reader: c, Recorder: events, Logger: testfix.Quiet()})
	require.NoError(t, err)
	controlplane.Eventually(t, 10*time.Second, "the cache holds the Rollout's rollbackWindow", func() error {
		cached, err := c.Rollout(ctx, e.ns, "web")
		if err != nil || core.RollbackWindowNote(cached) == "" {
			return fmt.Errorf("not yet (err %v)", err)
		}
		return nil
	})

	res, err := a.Attach(ctx, e.event(rs, core.DefaultOptions()))
	require.NoError(t, err)
	require.Equal(t, 1, res.Writes())
	require.Len(t, res.Notes, 1)
	assert.Contains(t, res.Notes[0], "a rollback inside the window can reach a ReplicaSet whose config is gone")
	got := drain(events)
	require.Len(t, got, 2, "an Attached Event on the ConfigMap and a Warning on the Rollout: %v", got)
	var warning string
	for _, ev := range got {
		if strings.HasPrefix(ev, "Warning") {
			warning = ev
		}
	}
	assert.Contains(t, warning, "Warning "+core.ReasonRollbackWindow+" spec.rollbackWindow.revisions 3")
	assert.Contains(t, warning, "kind=Rollout,apiVersion=argoproj.io/v1alpha1")

	res, err = a.Attach(ctx, e.event(rs, core.DefaultOptions()))
	require.NoError(t, err)
	assert.Equal(t, 0, res.Writes())
	assert.Len(t, res.Notes, 1, "the replay still reports it")
	assert.Empty(t, drain(events), "the replay records no Event")
}

func drain(r *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case ev := <-r.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}
