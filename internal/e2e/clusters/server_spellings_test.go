package clusters_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// TestApiserverReachedThroughTheUnspecifiedAddressIsADuplicateServer: a Secret that
// writes a local apiserver as https://0.0.0.0:port or https://[::]:port reaches the
// same listener as https://127.0.0.1:port (a connection to the unspecified address is
// a connection to this host), so next to a Secret naming it by 127.0.0.1 with
// overlapping namespaces both are refused (duplicate-server), never both served.
func TestApiserverReachedThroughTheUnspecifiedAddressIsADuplicateServer(t *testing.T) {
	a, b := planes()
	if a == nil {
		t.Skip("integration test: needs two local control planes (not started with -short)")
	}
	for _, spelling := range []string{"0.0.0.0", "[::]"} {
		t.Run(spelling, func(t *testing.T) {
			ctx := context.Background()
			breakRun.Add(1)
			argocd := uniq("unspec-argocd")
			createNamespace(t, a, argocd)
			s := startBreakServe(t, cluster.Options{
				Clusters:        []cluster.Spec{{Name: "hub", Source: cluster.SourceHome, Origin: "test", Config: a.RESTConfig()}},
				ArgoCDNamespace: argocd,
			}, server.Ingress{})
			secrets := a.Client().CoreV1().Secrets(argocd)
			for _, c := range []struct{ name, server string }{
				{"plain", b.ServerURL()},
				{"unspecified", strings.Replace(b.ServerURL(), "127.0.0.1", spelling, 1)},
			} {
				sec := b.ArgoCDClusterSecret(c.name, c.name)
				sec.Namespace = argocd
				cfg, err := json.Marshal(map[string]any{"bearerToken": b.AdminToken(), "tlsClientConfig": map[string]any{"insecure": true}})
				require.NoError(t, err)
				sec.StringData["server"], sec.StringData["config"] = c.server, string(cfg)
				_, err = secrets.Create(ctx, sec, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			controlplane.Eventually(t, 30*time.Second, "both refused as one server named twice", func() error {
				for _, c := range []string{"plain", "unspecified"} {
					st, _ := statusOf(s, argocd+"/"+c)
					if st.Registered || st.Reason != cluster.ReasonDuplicateServer {
						return fmt.Errorf("%s: registered=%v healthy=%v reason=%q", c, st.Registered, s.srv.Clusters().Healthy(c), st.Reason)
					}
				}
				return nil
			})
		})
	}
}
