package watch_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/configmap-attacher/configmap-attacher/internal/cache"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/watch"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

var sharedCP *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.TestMain(m, &sharedCP)) }

// runWatcher starts a cache and a watcher as `serve --watch` does, with requests counted.
func runWatcher(t *testing.T, counter *kube.RequestCounter) (stop func()) {
	t.Helper()
	cp := controlplane.Require(t, sharedCP)
	quiet := testfix.Quiet()
	clients, err := kube.NewClients(counter.Wrap(cp.RESTConfig()))
	require.NoError(t, err)
	c, err := cache.New(clients, cache.Options{Logger: quiet})
	require.NoError(t, err)
	att, err := core.NewAttacher(core.Config{Client: clients.Kube, Reader: c, Logger: quiet})
	require.NoError(t, err)
	clusters, err := dispatch.NewSingleCluster("", att)
	require.NoError(t, err)
	d, err := dispatch.New(dispatch.Config{Clusters: clusters, Logger: quiet})
	require.NoError(t, err)
	w, err := watch.NewReplicaSets(c.ReplicaSetInformer(), d, watch.Options{Logger: quiet})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = c.Run(ctx); done <- struct{}{} }()
	go func() { _ = w.Run(ctx); done <- struct{}{} }()
	return func() { cancel(); <-done; <-done }
}

func createRS(t *testing.T, kc kubernetes.Interface, ns, name, cm string) *appsv1.ReplicaSet {
	return testfix.CreateReplicaSet(t, kc, ns, name, cm)
}

func ownedBy(kc kubernetes.Interface, ns, cm string, rs *appsv1.ReplicaSet) error {
	obj, err := kc.CoreV1().ConfigMaps(ns).Get(context.Background(), cm, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, o := range obj.OwnerReferences {
		if o.UID == rs.UID {
			return nil
		}
	}
	return fmt.Errorf("%s not owned by %s yet", cm, rs.Name)
}

// The watcher attaches new ReplicaSets; ReplicaSets created while it was stopped are
// repaired after a restart, and the restart's replay of the others writes nothing.
func TestWatcherRepairsAfterRestart(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	kc := cp.Client()
	ctx := context.Background()
	const ns = "watcher"
	_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, name := range []string{"cfg-1", "cfg-2"} {
		_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{core.LabelRevision: "true"}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	first := &kube.RequestCounter{}
	stop := runWatcher(t, first)
	rs1 := createRS(t, kc, ns, "web-1", "cfg-1")
	controlplane.Eventually(t, 20*time.Second, "the watcher to attach cfg-1", func() error { return ownedBy(kc, ns, "cfg-1", rs1) })
	stop()

	rs2 := createRS(t, kc, ns, "web-2", "cfg-2") // created while the service is down

	second := &kube.RequestCounter{}
	stop = runWatcher(t, second)
	defer stop()
	controlplane.Eventually(t, 20*time.Second, "the restarted watcher to repair cfg-2", func() error { return ownedBy(kc, ns, "cfg-2", rs2) })
	// Give the backfill time to process every ReplicaSet, then count writes: only the
	// repair of cfg-2 may have written.
	time.Sleep(time.Second)
	assert.Equal(t, 1, second.Count("PATCH"), "the restart's replay of web-1 must not write; web-2's repair writes once")
	assert.Equal(t, 1, second.Writes())
}
