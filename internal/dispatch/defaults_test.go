package dispatch_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// The dispatcher is the one holder of the service's defaults: a way in without a spec of
// its own sends a Request without Options and gets them; a spec parsed by the dispatcher
// starts from them; options a way in gives are used as they are.
func TestTheDispatcherAppliesTheServiceDefaults(t *testing.T) {
	kc := fake.NewClientset()
	att, err := core.NewAttacher(core.Config{Cluster: "home", Client: kc, Reader: core.LiveReader{Client: kc}, Logger: testfix.Quiet()})
	require.NoError(t, err)
	clusters, err := dispatch.NewSingleCluster("home", att)
	require.NoError(t, err)
	defaults := core.DefaultOptions()
	defaults.DryRun, defaults.IncludeSecrets = true, true // observable in every answer, and in Defaults
	d, err := dispatch.New(dispatch.Config{Clusters: clusters, Defaults: &defaults, Logger: testfix.Quiet()})
	require.NoError(t, err)
	parsed, err := d.ParseSpec(map[string]string{core.SpecConfigMaps: "cfg-1"})
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		options core.Options
		dryRun  bool
	}{
		{"no options: the service's defaults", core.Options{}, true},
		{"a spec parsed by the dispatcher starts from them", parsed, true},
		{"options given are used as they are", core.DefaultOptions(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := d.Dispatch(context.Background(), dispatch.Request{Path: dispatch.PathWatcher, Options: tc.options,
				Event: core.Event{Cluster: "home", Namespace: "shop", Name: "web-1", UID: "u-1"}})
			assert.Equal(t, tc.dryRun, a.Response.DryRun, "%s: %v", a.Class, a.Err)
		})
	}
	got := d.Defaults()
	assert.True(t, got.DryRun && got.IncludeSecrets, "Defaults returns the configured defaults")
}
