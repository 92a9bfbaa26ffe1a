package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// writeScript writes an executable shell script named name into dir.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755))
	return p
}

// execSecret is an Argo CD cluster Secret whose credentials come from command.
func execSecret(server, command string, args []string, env map[string]string) *corev1.Secret {
	cfg, _ := json.Marshal(map[string]any{"tlsClientConfig": map[string]any{"insecure": true},
		"execProviderConfig": map[string]any{"command": command, "args": args, "env": env, "apiVersion": "client.authentication.k8s.io/v1beta1"}})
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "exec", Namespace: "argocd",
		Labels: map[string]string{ArgoCDSecretTypeLabel: ArgoCDSecretTypeCluster}},
		StringData: map[string]string{"name": "exec", "server": server, "config": string(cfg)}}
}

func TestCredentialPluginsRunOnlyWhenTheOperatorAllowsThem(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	plugin := writeScript(t, dir, "my-plugin", "touch "+marker+"\n")
	other := writeScript(t, dir, "other-plugin", "touch "+marker+"\n")
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	self, err := os.Executable()
	require.NoError(t, err)

	byName, err := NewExecPolicy([]string{"my-plugin"}, 0, self)
	require.NoError(t, err)
	byPath, err := NewExecPolicy([]string{plugin}, 0, self)
	require.NoError(t, err)

	tests := []struct {
		name    string
		policy  *ExecPolicy
		command string
		env     map[string]string
		wantErr error
	}{
		{name: "no allow-list: refused", policy: nil, command: plugin, wantErr: ErrExecNotAllowed},
		{name: "a bare name allowed by name", policy: byName, command: "my-plugin"},
		{name: "the resolved path of an allowed bare name", policy: byName, command: plugin},
		{name: "an absolute path allowed", policy: byPath, command: plugin},
		{name: "a bare name the service's PATH (not the Secret's) resolves to an allowed path", policy: byPath, command: "my-plugin",
			env: map[string]string{"PATH": "/nowhere"}},
		{name: "another command: refused", policy: byName, command: other, wantErr: ErrExecNotAllowed},
		{name: "the service itself: refused", policy: byName, command: self, wantErr: ErrExecNotAllowed},
		{name: "a shell: refused", policy: byName, command: "/bin/sh", wantErr: ErrExecNotAllowed},
		{name: "an allowed plugin with the loader's environment: refused", policy: byName, command: "my-plugin",
			env: map[string]string{"LD_PRELOAD": "/tmp/evil.so"}, wantErr: ErrExecNotAllowed},
		{name: "an allowed plugin may not set KUBERNETES_EXEC_INFO", policy: byName, command: "my-plugin",
			env: map[string]string{ExecInfoEnv: "{}"}, wantErr: ErrExecNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sp, err := SpecFromSecretAllowing(execSecret("https://127.0.0.1:1", tt.command, nil, tt.env), tt.policy)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				assert.Contains(t, err.Error(), "Argo CD cluster Secret argocd/exec")
				assert.Nil(t, sp.creds)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, sp.creds)
			assert.Equal(t, plugin, sp.creds.path, "what runs is the allowed path")
		})
	}
	_, err = os.Stat(marker)
	assert.True(t, os.IsNotExist(err), "building Specs never runs a plugin")
}

func TestExecAllowListEntriesAreChecked(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	link := filepath.Join(t.TempDir(), "innocent-name")
	require.NoError(t, os.Symlink(self, link))
	for _, tt := range []struct{ name, entry, want string }{
		{"a relative path", "./plugin", "not a relative path"},
		{"a bare name not in $PATH", "no-such-plugin-anywhere", "not found in $PATH"},
		{"this program", self, "own executable"},
		{"this program under another name", link, "own executable"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewExecPolicy([]string{tt.entry}, 0, self)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

// TestAbsoluteAllowEntryAcceptsTheBareNameOnlyWhenPathLeadsThere: Argo CD's Secrets
// name "aws"; an operator allowing "/opt/x/aws" accepts that bare name only when the
// service's own $PATH resolves it to the same file, never another file of that name.
func TestAbsoluteAllowEntryAcceptsTheBareNameOnlyWhenPathLeadsThere(t *testing.T) {
	allowedDir, otherDir := t.TempDir(), t.TempDir()
	plugin := filepath.Join(allowedDir, "aws")
	for _, d := range []string{allowedDir, otherDir} {
		require.NoError(t, os.WriteFile(filepath.Join(d, "aws"), []byte("#!/bin/sh\n"), 0o755))
	}
	for _, tt := range []struct {
		name, path, command string
		allowed             bool
	}{
		{"bare name resolving to the allowed file", allowedDir, "aws", true},
		{"the absolute path itself", otherDir, plugin, true},
		{"bare name resolving to another file", otherDir, "aws", false},
		{"bare name not on PATH", t.TempDir(), "aws", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PATH", tt.path)
			p, err := NewExecPolicy([]string{plugin}, 0, "")
			require.NoError(t, err)
			got, err := p.resolve(tt.command)
			if !tt.allowed {
				require.ErrorIs(t, err, ErrExecNotAllowed)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, plugin, got)
		})
	}
}

// alive reports whether pid runs (a zombie counts as gone).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

// pids reads the process ids a hanging plugin wrote (itself and its child).
func pids(t *testing.T, file string) []int {
	t.Helper()
	var out []int
	b, _ := os.ReadFile(file)
	for _, l := range strings.Fields(string(b)) {
		n, err := strconv.Atoi(l)
		require.NoError(t, err)
		out = append(out, n)
	}
	return out
}

const hangingPlugin = `echo $$ >> "$1"
sleep 300 &
echo $! >> "$1"
wait
`

func TestHangingCredentialPluginIsKilledAndBackedOff(t *testing.T) {
	dir := t.TempDir()
	plugin := writeScript(t, dir, "hang", hangingPlugin)
	pidFile := filepath.Join(dir, "pids")
	c := newExecCreds(plugin, "client.authentication.k8s.io/v1beta1", []string{pidFile}, nil, 500*time.Millisecond)
	defer c.Close()

	_, err := c.get(context.Background())
	require.ErrorIs(t, err, ErrCredentials)
	assert.Contains(t, err.Error(), "did not finish within 500ms")
	got := pids(t, pidFile)
	require.Len(t, got, 2, "the plugin and its child")
	controlplane.Eventually(t, 10*time.Second, "the plugin and its child killed", func() error {
		for _, p := range got {
			if alive(p) {
				return errors.New("pid " + strconv.Itoa(p) + " still runs")
			}
		}
		return nil
	})

	// Within the backoff every request fails at once, without a run.
	for range 50 {
		_, err := c.get(context.Background())
		require.ErrorIs(t, err, ErrCredentials)
		assert.Contains(t, err.Error(), "next try in")
	}
	assert.Equal(t, 1, c.Runs(), "one run, not one per request")
}

func TestRemovedClusterKillsItsRunningPlugin(t *testing.T) {
	dir := t.TempDir()
	plugin := writeScript(t, dir, "hang", hangingPlugin)
	pidFile := filepath.Join(dir, "pids")
	c := newExecCreds(plugin, "client.authentication.k8s.io/v1beta1", []string{pidFile}, nil, time.Hour)
	errc := make(chan error, 1)
	go func() { _, err := c.get(context.Background()); errc <- err }()
	controlplane.Eventually(t, 10*time.Second, "the plugin started", func() error {
		if len(pids(t, pidFile)) < 2 {
			return errors.New("not yet")
		}
		return nil
	})
	c.Close()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, ErrCredentials)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting request did not end with the cluster")
	}
	controlplane.Eventually(t, 10*time.Second, "the plugin and its child killed", func() error {
		for _, p := range pids(t, pidFile) {
			if alive(p) {
				return errors.New("still runs")
			}
		}
		return nil
	})
}

func TestAllowedPluginTokenAuthenticatesRequests(t *testing.T) {
	dir := t.TempDir()
	exp := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	plugin := writeScript(t, dir, "token", `[ -n "$KUBERNETES_EXEC_INFO" ] || exit 3
echo '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"tok-'"$1"'","expirationTimestamp":"`+exp+`"}}'
`)
	var seen []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
	}))
	defer ts.Close()
	c := newExecCreds(plugin, "client.authentication.k8s.io/v1beta1", []string{"a"}, nil, 10*time.Second)
	defer c.Close()
	client := &http.Client{Transport: c.wrap(http.DefaultTransport)}
	for range 3 {
		resp, err := client.Get(ts.URL)
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, []string{"Bearer tok-a", "Bearer tok-a", "Bearer tok-a"}, seen)
	assert.Equal(t, 1, c.Runs(), "the token is cached until it expires")
}
