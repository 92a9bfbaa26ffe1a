package cluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClusterSecretCannotMakeAnAllowedPluginRunItsCode: a cluster Secret's
// execProviderConfig.env may not carry what makes a shell run code of the Secret's
// choosing without a file (bash's exported functions, BASH_ENV/ENV, xtrace's PS4).
// Allowed plugins are often wrappers that end in a shell (gcloud behind
// gke-gcloud-auth-plugin, vendor scripts), and the plugin runs with the service's
// credentials: such a Secret is refused (exec-not-allowed), nothing runs. If the Secret
// were accepted, the test runs the plugin and shows the marker the Secret's code wrote.
func TestClusterSecretCannotMakeAnAllowedPluginRunItsCode(t *testing.T) {
	if _, err := os.Stat("/bin/bash"); err != nil {
		t.Skip("needs /bin/bash")
	}
	dir := t.TempDir()
	marker := filepath.Join(dir, "pwned")
	exp := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	plugin := filepath.Join(dir, "vendor-plugin")
	require.NoError(t, os.WriteFile(plugin, []byte("#!/bin/bash\n"+
		`echo '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"t","expirationTimestamp":"`+exp+`"}}'`+"\n"), 0o755))
	startup := filepath.Join(dir, "startup.sh")
	require.NoError(t, os.WriteFile(startup, []byte("touch "+marker+"\n"), 0o644))
	policy, err := NewExecPolicy([]string{plugin}, 10*time.Second, "")
	require.NoError(t, err)

	tests := []struct {
		name string
		env  map[string]string
	}{
		{name: "a bash function exported over a builtin", env: map[string]string{"BASH_FUNC_echo%%": "() { touch " + marker + "; builtin echo \"$@\"; }"}},
		{name: "a name that is not an identifier", env: map[string]string{"X Y": "z"}},
		{name: "bash's startup file", env: map[string]string{"BASH_ENV": startup}},
		{name: "sh's startup file", env: map[string]string{"ENV": startup}},
		{name: "xtrace with a command in PS4", env: map[string]string{"SHELLOPTS": "xtrace", "PS4": "$(touch " + marker + ")"}},
		{name: "bash options", env: map[string]string{"BASHOPTS": "extdebug"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp, err := SpecFromSecretAllowing(execSecret("https://127.0.0.1:1", plugin, nil, tt.env), policy)
			if err == nil {
				defer sp.closeCredentials()
				_, runErr := sp.creds.get(context.Background())
				_, statErr := os.Stat(marker)
				_ = os.Remove(marker)
				t.Fatalf("the Secret was accepted (plugin run: %v); the Secret's code ran: %v", runErr, statErr == nil)
			}
			require.ErrorIs(t, err, ErrExecNotAllowed)
			assert.Contains(t, err.Error(), "may not be set by a cluster Secret")
		})
	}
	_, err = os.Stat(marker)
	assert.True(t, os.IsNotExist(err), "no Secret's code ran")
}

// TestPluginEnvironmentAnArgoCDSecretNeedsIsAllowed: the refusals above leave the
// variables real plugins take (AWS_PROFILE, AZURE_CONFIG_DIR, ...) alone.
func TestPluginEnvironmentAnArgoCDSecretNeedsIsAllowed(t *testing.T) {
	dir := t.TempDir()
	plugin := writeScript(t, dir, "aws", "exit 0\n")
	policy, err := NewExecPolicy([]string{plugin}, 0, "")
	require.NoError(t, err)
	sp, err := SpecFromSecretAllowing(execSecret("https://127.0.0.1:1", plugin, nil,
		map[string]string{"AWS_PROFILE": "prod", "AWS_REGION": "eu-west-1", "AZURE_CONFIG_DIR": "/tmp/az", "_x1": "y"}), policy)
	require.NoError(t, err)
	sp.closeCredentials()
}
