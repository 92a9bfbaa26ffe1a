package server_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// serviceDefaultsRuns numbers the runs, so that -count=N gives each its own namespace.
var serviceDefaultsRuns atomic.Int64

// The built-in watcher has no spec of its own: its events carry no options and the
// dispatcher applies the service's defaults, the one copy of them. With AllowSecrets an
// opted-in Secret the ReplicaSet mounts is attached with its ConfigMap; without, the same
// attach leaves the Secret alone.
func TestTheWatcherAttachesWithTheServiceDefaults(t *testing.T) {
	for _, allow := range []bool{true, false} {
		t.Run(fmt.Sprintf("allow-secrets=%t", allow), func(t *testing.T) {
			kc := controlplane.Require(t, cp).Client()
			ctx := context.Background()
			ns := fmt.Sprintf("service-defaults-%t-%d", allow, serviceDefaultsRuns.Add(1))
			testfix.CreateNamespace(t, kc, ns)
			_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, testfix.Revision(ns, "cfg"), metav1.CreateOptions{})
			require.NoError(t, err)
			_, err = kc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec",
				Labels: map[string]string{core.LabelRevision: "true"}}, Data: map[string][]byte{"k": []byte("v")}}, metav1.CreateOptions{})
			require.NoError(t, err)
			startServer(t, server.Options{AllowSecrets: allow, Ingress: server.Ingress{Watch: true}}, nil, "http", http.DefaultClient)
			rs := testfix.ReplicaSet("web-1", "cfg")
			rs.Spec.Template.Spec.Volumes = append(rs.Spec.Template.Spec.Volumes, corev1.Volume{Name: "sec",
				VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec"}}})
			rs, err = kc.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
			require.NoError(t, err)
			waitOwned(t, kc, ns, "cfg", rs) // the watcher's attach handled both objects
			sec, err := kc.CoreV1().Secrets(ns).Get(ctx, "sec", metav1.GetOptions{})
			require.NoError(t, err)
			owned := len(sec.OwnerReferences) == 1 && sec.OwnerReferences[0].UID == rs.UID
			assert.Equal(t, allow, owned, "Secret owners %v", sec.OwnerReferences)
		})
	}
}
