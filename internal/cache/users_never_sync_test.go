package cache

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// A sweep of a cluster whose user informers never sync (RBAC that forbids the list of one
// kind, an apiserver that never answers it) does not wait for them for the life of the
// cluster: Workloads answers incomplete (the sweep fails, retried later) once
// usersSyncWait has passed since they started, and at once after that, so the sweeper
// is not held forever in one namespace with its lock (an on-demand sweep of it would
// wait on that lock whatever its deadline) and the cluster's other namespaces are swept.
func TestSweepDoesNotWaitForeverForUserInformersThatNeverSync(t *testing.T) {
	prev := usersSyncWait
	usersSyncWait = 200 * time.Millisecond
	t.Cleanup(func() { usersSyncWait = prev })
	kc := fake.NewClientset(&appsv1.ReplicaSet{ObjectMeta: objMeta("api-1", "rs-1", nil), Spec: appsv1.ReplicaSetSpec{Template: template("cfg")}})
	kc.PrependReactor("list", "jobs", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "", errors.New("RBAC: no list"))
	})
	clients := &kube.Clients{Kube: kc,
		Dynamic:  dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{core.RolloutGVR: "RolloutList"}),
		Metadata: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())}
	c, err := New(clients, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	wctx, wcancel := context.WithTimeout(ctx, time.Minute) // a sweeper's context: far longer than usersSyncWait
	defer wcancel()
	require.NoError(t, c.WaitForSync(wctx))

	for _, sweep := range []string{"first", "second"} {
		_, complete := c.Workloads(wctx, "shop")
		assert.False(t, complete, "%s sweep: the workloads are not known completely", sweep)
		require.NoError(t, wctx.Err(), "%s sweep: Workloads returned before the sweeper's context ended", sweep)
	}
}
