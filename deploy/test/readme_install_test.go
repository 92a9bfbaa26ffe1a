package deploytest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeInstallSaysTheReceiverNeedsAToken: the root README's install command works
// as written only with a bearer token for the HTTP receiver (the chart refuses to render
// without one, or without httpAuth.enabled=false): the section says so and how.
func TestReadmeInstallSaysTheReceiverNeedsAToken(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Install: what to pin\n")
	if !ok {
		t.Fatal(`README.md has no "## Install: what to pin" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, want := range []string{
		"--set httpAuth.existingSecret=configmap-attacher-http-token", // in the install command itself
		"kubectl -n configmap-attacher create secret generic configmap-attacher-http-token",
		"httpAuth.token",
		"httpAuth.enabled=false",
		"httpAuth: the HTTP receiver requires a bearer token", // the error a user without one sees
	} {
		if !strings.Contains(section, want) {
			t.Errorf("README.md's install section does not say %q", want)
		}
	}
}
