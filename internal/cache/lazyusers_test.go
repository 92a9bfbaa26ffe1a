package cache

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// The user informers start with the first read that needs them: a synced cache with no
// such read runs none; Users starts them and reads live until they have synced (never a
// partial answer); a sweep's Workloads starts them and waits, then answers with every user.
func TestUserInformersStartWithTheirFirstRead(t *testing.T) {
	tests := []struct {
		name      string
		read      func(ctx context.Context, c *Cache) []string
		wantStart bool
	}{
		{name: "no read: not started", read: func(context.Context, *Cache) []string { return nil }},
		{name: "Users: started, the answer complete", wantStart: true, read: func(ctx context.Context, c *Cache) []string {
			u, err := c.Users(ctx, core.KindConfigMap, "shop", "cfg")
			require.NoError(t, err)
			return ownerNames(u)
		}},
		{name: "Workloads: started and waited for", wantStart: true, read: func(ctx context.Context, c *Cache) []string {
			objs, complete := c.Workloads(ctx, "shop")
			require.True(t, complete)
			var out []string
			for _, o := range objs {
				if p, ok := o.(*corev1.Pod); ok {
					out = append(out, "Pod/"+p.Name)
				}
			}
			return out
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := []runtime.Object{
				&appsv1.ReplicaSet{ObjectMeta: objMeta("api-1", "rs-1", nil), Spec: appsv1.ReplicaSetSpec{Template: template("other")}},
				&corev1.Pod{ObjectMeta: objMeta("debug", "pod-1", nil), Spec: template("cfg").Spec},
			}
			clients := &kube.Clients{Kube: fake.NewClientset(objs...),
				Dynamic:  dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{core.RolloutGVR: "RolloutList"}),
				Metadata: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())}
			c, err := New(clients, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- c.Run(ctx) }()
			defer func() { cancel(); require.NoError(t, <-done) }()
			wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
			defer wcancel()
			require.NoError(t, c.WaitForSync(wctx))

			got := tc.read(wctx, c)
			c.users.mu.Lock()
			started := c.users.started
			c.users.mu.Unlock()
			assert.Equal(t, tc.wantStart, started, "user informers started")
			if tc.wantStart {
				assert.Equal(t, []string{"Pod/debug"}, got, "the Pod using cfg is in the answer")
			}
		})
	}
}
