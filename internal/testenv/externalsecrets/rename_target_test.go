package externalsecrets_test

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/externalsecrets"
)

// The pattern the README warns against: one ExternalSecret whose spec.target.name
// changes with each release. The service reports it when it attaches the first
// revision, before anything is renamed: a Warning Event on the ExternalSecret and on
// the ReplicaSet, the metric, and a `status` line with the fix. Then the control: the
// rename makes ESO delete the Secret the old ReplicaSet still uses, whatever its owners.
func TestRenamingTheTargetIsReportedBeforeESODeletesTheSecret(t *testing.T) {
	w := newWorld(t, map[string]string{"/web/password": "p"})
	w.externalSecret("web-secret", "web-secret-v1", map[string]string{"password": "/web/password"})
	rs1 := w.bareReplicaSet("web-1", "web-secret-v1")
	w.waitSynced("web-secret")
	es, err := w.getExternalSecret("web-secret")
	if err != nil {
		t.Fatal(err)
	}
	w.waitOwners("web-secret-v1", rs1.UID, es.GetUID())

	w.Eventually("a Warning Event on the ExternalSecret and on the ReplicaSet", func() error {
		if n, m := w.warnings("web-secret", core.ReasonExternalSecretRename), w.warnings(rs1.Name, core.ReasonExternalSecretRename); n == 0 || m == 0 {
			return fmt.Errorf("%d on the ExternalSecret, %d on the ReplicaSet", n, m)
		}
		return nil
	})
	series := `configmap_attacher_unprotected_revisions_total{cluster="in-cluster",reason="` + core.ReasonExternalSecretRename + `"}`
	if v := w.metric(series); v == "" || v == "0" {
		t.Fatalf("%s = %q, want at least 1", series, v)
	}
	out := w.status()
	for _, want := range []string{"Secret web-secret-v1  " + core.ReasonExternalSecretRename, "fix: use one ExternalSecret per revision"} {
		if !strings.Contains(out, want) {
			t.Fatalf("status has no %q:\n%s", want, out)
		}
	}

	// The control: the next release renames the target (and its ReplicaSet reads the new
	// name); ESO deletes web-secret-v1 while the old ReplicaSet still owns and uses it.
	if err := externalsecrets.SetTarget(w.Ctx, w.Dynamic, w.NS, "web-secret", "web-secret-v2"); err != nil {
		t.Fatal(err)
	}
	rs2 := w.bareReplicaSet("web-2", "web-secret-v2")
	w.WaitGone("Secret web-secret-v1", func() error { _, err := w.secret("web-secret-v1"); return err })
	if _, err := w.Kube.AppsV1().ReplicaSets(w.NS).Get(w.Ctx, rs1.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("the old ReplicaSet %s: %v", rs1.Name, err)
	}
	w.waitSynced("web-secret")
	w.waitOwners("web-secret-v2", rs2.UID, es.GetUID())
}
