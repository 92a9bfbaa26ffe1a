package core_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// appOptions is an ApplicationReader answering from a map ("namespace/name" -> options),
// the optional read of the Argo CD Application (the real one is kube.Applications,
// exercised against the real Argo CD in internal/testenv/argocd).
type appOptions map[string][]string

func (a appOptions) SyncOptions(_ context.Context, ns, name string) ([]string, error) {
	return a[ns+"/"+name], nil
}

// A revision that opts into controller-only owner references, itself or through its
// Application, is attached as usual and reported on the write that attaches it: the
// result's warning and a Warning Event on the revision and on the ReplicaSet. A replay
// of the same event writes nothing and reports nothing again.
func TestAttachingARevisionThatOptsOutOfOwnerProtectionWarns(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
	}{
		{"ControllerReferencesOnly=true on the revision", map[string]string{core.ArgoCDSyncOptions: "ControllerReferencesOnly=true"}},
		{"an Application with an owner-references sync option", map[string]string{core.ArgoCDTrackingID: "shop:/ConfigMap:x/web-config"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			clients, err := kube.NewClients(requireCP(t).RESTConfig())
			require.NoError(t, err)
			a, err := core.NewAttacher(core.Config{Cluster: "local", Client: clients.Kube, AllowSecrets: true,
				Reader:       core.LiveReader{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata},
				Recorder:     &kube.SyncRecorder{Client: e.kc, Component: "configmap-attacher"},
				Applications: appOptions{"/shop": {"CreateNamespace=true", "IgnoreOwnerReferencesOnPrune=true"}},
				Logger:       testfix.Quiet()})
			require.NoError(t, err)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config", Labels: map[string]string{core.LabelRevision: "true"},
				Annotations: tc.annotations}}
			_, err = e.kc.CoreV1().ConfigMaps(e.ns).Create(ctx, cm, metav1.CreateOptions{})
			require.NoError(t, err)
			rs := e.replicaSet("web-1", nil, podTemplate("web", "web-config"))

			res, err := a.Attach(ctx, e.event(rs, core.DefaultOptions()))
			require.NoError(t, err)
			or := resultFor(res, core.KindConfigMap, "web-config")
			require.Equal(t, core.OutcomeAttached, or.Outcome)
			require.Len(t, or.Warnings, 1, "one warning: %+v", or.Warnings)
			require.Equal(t, core.ReasonNotProtectedFromPruning, or.Warnings[0].Reason)
			for _, name := range []string{"web-config", rs.Name} {
				require.Equal(t, 1, warningEvents(t, e, name, core.ReasonNotProtectedFromPruning), "Warning Events on %s", name)
			}

			res, err = a.Attach(ctx, e.event(rs, core.DefaultOptions()))
			require.NoError(t, err)
			require.Empty(t, resultFor(res, core.KindConfigMap, "web-config").Warnings, "a replay reports nothing again")
			require.Equal(t, 1, warningEvents(t, e, "web-config", core.ReasonNotProtectedFromPruning))
		})
	}
}

func warningEvents(t *testing.T, e *env, name, reason string) int {
	t.Helper()
	list, err := e.kc.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + name + ",reason=" + reason + ",type=Warning"})
	require.NoError(t, err)
	return len(list.Items)
}
