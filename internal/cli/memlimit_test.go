package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSoftMemoryLimitIsNinetyPercentOfTheContainerLimit(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    int64
		wantErr bool
	}{
		{"no container limit: none", nil, 0, false},
		{"384Mi limit: 90% of it", map[string]string{memoryLimitEnv: "402653184"}, 362387865, false},
		{"an explicit GOMEMLIMIT wins", map[string]string{memoryLimitEnv: "402653184", "GOMEMLIMIT": "300MiB"}, 0, false},
		{"not a byte count: an error", map[string]string{memoryLimitEnv: "384Mi"}, 0, true},
		{"negative: an error", map[string]string{memoryLimitEnv: "-1"}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := softMemoryLimit(func(k string) string { return tc.env[k] })
			if tc.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), memoryLimitEnv)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
