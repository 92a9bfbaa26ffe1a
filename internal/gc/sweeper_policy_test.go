package gc_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/gc"
)

// The namespace policy holds for on-demand sweeps: an excluded namespace is refused
// before anything is read, dry run or not.
func TestSweepNamespaceHonoursNamespacePolicy(t *testing.T) {
	kc := fake.NewClientset()
	policy, err := core.ParseNamespacePolicy(nil, core.DefaultExcludedNamespaces("configmap-attacher"))
	require.NoError(t, err)
	att, err := core.NewAttacher(core.Config{Client: kc, Reader: core.LiveReader{Client: kc}, Namespaces: policy})
	require.NoError(t, err)
	src := &countingSource{}
	sw, err := gc.NewSweeper(gc.Config{Client: kc, Source: src, Attacher: att})
	require.NoError(t, err)
	for _, ns := range []string{"kube-system", "kube-public", "configmap-attacher"} {
		_, err := sw.SweepNamespace(context.Background(), ns)
		require.ErrorIs(t, err, core.ErrRefused, ns)
		_, err = sw.SweepNamespaceDryRun(context.Background(), ns)
		require.ErrorIs(t, err, core.ErrRefused, ns)
	}
	assert.Zero(t, src.snapshots, "nothing is read")
}

type countingSource struct{ snapshots int }

func (c *countingSource) Snapshot(_ context.Context, ns string) (*gc.Snapshot, error) {
	c.snapshots++
	return &gc.Snapshot{Namespace: ns}, nil
}

func (c *countingSource) Namespaces(context.Context) ([]string, error) { return nil, nil }
