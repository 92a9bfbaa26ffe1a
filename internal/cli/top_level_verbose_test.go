package cli_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// Top-level -v is verbose, as on every subcommand (--version and version print the
// version): alone it prints the help; before a subcommand it is that subcommand's -v.
func TestTopLevelVIsVerbose(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ns := newNamespace(t, cp)
	testfix.CreateReplicaSet(t, cp.Client(), ns, "web-1", "web-config")
	_, err := cp.Client().CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	version := "configmap-attacher " + cli.Version + " ("
	runTable(t, []dayOneCase{
		{name: "-v alone prints the help, not the version", args: []string{"-v"}, wantCode: 0, wantOut: []string{"Usage:", "--version"}, emptyErr: true},
		{name: "--version prints the version", args: []string{"--version"}, wantCode: 0, wantOut: []string{version}},
		{name: "-v before a subcommand is its -v",
			args:     []string{"-v", "attach", "--kubeconfig", cp.Kubeconfig(), "-n", ns, "--replicaset", "web-1", "--configmaps", "web-config"},
			wantCode: 0, wantOut: []string{"web-config"}, wantErr: []string{"level=INFO"}},
	})
	code, out, _ := run(context.Background(), "-v")
	assert.Equal(t, 0, code)
	assert.NotContains(t, out, version, "-v is not --version")
}
