package controlplane_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

func TestRolloutsVersionIsChosenByOptionThenEnvironmentThenDefault(t *testing.T) {
	tests := []struct {
		name, option, env string
		wantBinary        string
		wantErr           string
	}{
		{name: "nothing set: v1.8", wantBinary: "rollouts-controller"},
		{name: "environment v1.10", env: "v1.10", wantBinary: "rollouts-controller-1.10"},
		{name: "option wins over the environment", option: "v1.8", env: "v1.10", wantBinary: "rollouts-controller"},
		{name: "unknown environment value", env: "1.10", wantErr: `$CONFIGMAP_ATTACHER_ROLLOUTS="1.10" is not a known Argo Rollouts version (known: v1.10, v1.8)`},
		{name: "unknown option", option: "v2", wantErr: `Options.Rollouts="v2"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(controlplane.RolloutsEnv, tc.env)
			r, err := controlplane.ResolveRollouts(tc.option)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantBinary, r.Binary)
		})
	}
}
