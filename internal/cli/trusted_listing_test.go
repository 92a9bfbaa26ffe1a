package cli_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A trusted listing counts only from a person's command line: in a process started as
// a Kubernetes credential plugin (client-go and serve set KUBERNETES_EXEC_INFO for
// every plugin they run) attach --configmaps/--secrets and the old Job's -configmaps
// are usage errors, before anything is contacted. This is how a cluster Secret whose
// plugin would start `configmap-attacher attach --configmaps victim` is stopped.
func TestTrustedListingIsRefusedInsideACredentialPlugin(t *testing.T) {
	t.Setenv("KUBERNETES_EXEC_INFO", `{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","spec":{"interactive":false}}`)
	t.Setenv("KUBECONFIG", "/nonexistent/kubeconfig")
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"attach --configmaps", []string{"attach", "--replicaset", "web-1", "-n", "kube-system", "--configmaps", "victim"}},
		{"attach --secrets", []string{"attach", "--deployment", "web", "-n", "shop", "--secrets", "victim"}},
		{"the old Job's form", []string{"-rollout", "web", "-namespace", "kube-system", "-configmaps", "victim"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(context.Background(), tt.args...)
			assert.Equal(t, 2, code, "a usage error; stdout %s\nstderr %s", out, errOut)
			assert.Contains(t, errOut, "trusted only from a person's command line")
			assert.Contains(t, errOut, "KUBERNETES_EXEC_INFO")
		})
	}
}
