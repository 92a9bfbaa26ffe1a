package controlplane_test

import (
	"context"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

var cp *controlplane.ControlPlane

func TestMain(m *testing.M) { os.Exit(controlplane.TestMain(m, &cp)) }

func TestControlPlane(t *testing.T) {
	cp := controlplane.Require(t, cp)
	kc := cp.Client()
	ctx := context.Background()

	t.Run("version is the pinned Kubernetes release", func(t *testing.T) {
		v, err := kc.Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(v.GitVersion, "v1.34.") {
			t.Fatalf("server version %q, want v1.34.x", v.GitVersion)
		}
	})
	t.Run("Argo CRDs are served", func(t *testing.T) {
		for _, gv := range []string{"argoproj.io/v1alpha1"} {
			rl, err := kc.Discovery().ServerResourcesForGroupVersion(gv)
			if err != nil {
				t.Fatal(err)
			}
			have := map[string]bool{}
			for _, r := range rl.APIResources {
				have[r.Name] = true
			}
			for _, want := range []string{"rollouts", "analysistemplates", "eventsources", "sensors", "eventbus"} {
				if !have[want] {
					t.Errorf("%s/%s not served", gv, want)
				}
			}
		}
	})
	t.Run("RBAC denies an unknown token", func(t *testing.T) {
		_, err := controlplane.NewClientOrDie(cp.TokenConfig("not-a-token")).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err == nil {
			t.Fatal("want an authentication error")
		}
	})
}
