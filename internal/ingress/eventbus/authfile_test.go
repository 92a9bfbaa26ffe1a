package eventbus

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadAuthFileTakesArgoEventsAccessSecrets(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          Auth
		err           string
	}{
		// What the Argo Events EventBus controller writes into client-auth.
		{"username and password", "username: attacher\npassword: s3cret", Auth{User: "attacher", Password: "s3cret"}, ""},
		{"token", `token: "t0ken"`, Auth{Token: "t0ken"}, ""},
		{"both", "token: a\nusername: b\npassword: c", Auth{}, "keep one"},
		{"user without password", "username: b", Auth{}, "go together"},
		{"empty", "", Auth{}, "no credentials"},
		{"unknown key", "user: b\npass: c", Auth{}, "not the YAML"},
		{"not YAML", "::: [", Auth{}, "not the YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "auth.yaml")
			require.NoError(t, os.WriteFile(p, []byte(tc.content), 0o600))
			got, err := ReadAuthFile(p)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				assert.NotContains(t, err.Error(), "s3cret", "the error never shows the content")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
