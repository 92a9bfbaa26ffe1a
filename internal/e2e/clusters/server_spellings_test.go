package clusters_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	a, b := needPlanes(t)
	for _, spelling := range []string{"0.0.0.0", "[::]"} {
		t.Run(spelling, func(t *testing.T) {
			breakRun.Add(1)
			argocd := namespace(t, a, "unspec-argocd")
			s := startBreakServe(t, hubOptions(a, argocd), server.Ingress{})
			for _, c := range []struct{ name, server string }{
				{"plain", b.ServerURL()},
				{"unspecified", strings.Replace(b.ServerURL(), "127.0.0.1", spelling, 1)},
			} {
				sec := clusterSecret(b, argocd, c.name, c.name)
				cfg, err := json.Marshal(map[string]any{"bearerToken": b.AdminToken(), "tlsClientConfig": map[string]any{"insecure": true}})
				require.NoError(t, err)
				sec.StringData["server"], sec.StringData["config"] = c.server, string(cfg)
				createSecret(t, a, sec)
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
