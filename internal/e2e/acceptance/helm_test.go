package acceptance_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Scenario 10. Plain Helm (no Argo CD): `helm upgrade` deletes what the previous release
// rendered and the new one does not, ownerReferences or not. A checksum-named revision
// therefore needs `helm.sh/resource-policy: keep` on its template: Helm leaves the old
// revision behind, the old ReplicaSet (kept by revisionHistoryLimit 1) owns it, and the
// garbage collector deletes it once a later upgrade retires that ReplicaSet. Without
// the annotation (the control) the upgrade itself deletes the old revision while its
// ReplicaSet is still there to be rolled back to.
func TestHelmUpgradeKeepsTheOldRevisionOnlyWithTheKeepPolicy(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("resource-policy keep %t", keep), func(t *testing.T) {
			w := newWorld(t)
			w.ServeWatcher()
			chart := writeChart(t)
			var rss []*appsv1.ReplicaSet
			var cms []string
			for v := 1; v <= 3; v++ {
				w.helm("upgrade", "--install", "web", chart, "--set", fmt.Sprintf("config=v%d,keep=%t", v, keep))
				a := app{name: "web", replicas: 2, configMap: configName(w, fmt.Sprintf("v%d", v)), version: "1"}
				rs := w.waitDeploymentComplete(a)
				w.waitOwned("ConfigMap", a.configMap, rs)
				rss, cms = append(rss, rs), append(cms, a.configMap)
				if v != 2 {
					continue
				}
				_, err := w.Kube.CoreV1().ConfigMaps(w.NS).Get(w.Ctx, cms[0], metav1.GetOptions{})
				switch {
				case keep && err != nil:
					t.Fatalf("revision %s after the upgrade: %v, want it kept for ReplicaSet %s", cms[0], err, rss[0].Name)
				case !keep && !apierrors.IsNotFound(err):
					t.Fatalf("revision %s after the upgrade without keep: %v, want it deleted by Helm", cms[0], err)
				}
				if !keep {
					w.getReplicaSet(rss[0]) // still there: the rollback target lost its config
					return
				}
			}
			w.WaitGone("ReplicaSet "+rss[0].Name, func() error { _, err := w.getErr(rss[0]); return err })
			w.waitConfigMapGone(cms[0])
			w.lag("ReplicaSet", rss[0].Name, "ConfigMap", cms[0])
			w.mustExist(cms[1])
		})
	}
}

// Scenario 12. `helm upgrade --force` replaces the release's objects (a PUT of the
// rendered manifest): the attached revision loses its ownerReferences; the service's
// revision side gives them back (an Attached Event says so).
func TestHelmUpgradeForceDropsOwnersAndTheServiceRestoresThem(t *testing.T) {
	w := newWorld(t)
	w.ServeWatcher()
	chart := writeChart(t)
	w.helm("upgrade", "--install", "web", chart, "--set", "config=v1,keep=true")
	a := app{name: "web", replicas: 2, configMap: configName(w, "v1"), version: "1"}
	rs := w.waitDeploymentComplete(a)
	w.waitOwned("ConfigMap", a.configMap, rs)
	before := w.mustExist(a.configMap)
	var events int
	w.Eventually("the first attach's Event", func() error {
		if events = w.attachedEvents(a.configMap); events == 0 {
			return fmt.Errorf("no Attached Event on %s yet", a.configMap)
		}
		return nil
	})

	w.helm("upgrade", "web", chart, "--force", "--set", "config=v1,keep=true")
	w.Eventually("an Attached Event for the owners given back", func() error {
		if n := w.attachedEvents(a.configMap); n <= events {
			return fmt.Errorf("%d Attached Events, %d before the forced upgrade", n, events)
		}
		return nil
	})
	w.waitOwned("ConfigMap", a.configMap, rs)
	if after := w.mustExist(a.configMap); after.UID != before.UID {
		t.Logf("the forced upgrade made %s anew (UID %s, now %s)", a.configMap, before.UID, after.UID)
	}
}

// attachedEvents counts the Attached Events (sum of their counts) on ConfigMap name.
func (w *world) attachedEvents(name string) int {
	w.T.Helper()
	n, err := testfix.AttachedEvents(w.Ctx, w.Kube, w.NS, name)
	if err != nil {
		w.T.Fatal(err)
	}
	return n
}

// helm runs bin/helm against the world's namespace, with its own state folders.
func (w *world) helm(args ...string) {
	w.T.Helper()
	dir := w.T.TempDir()
	args = append(args, "--kubeconfig", cp.Kubeconfig(), "--namespace", w.NS)
	cmd := exec.CommandContext(w.Ctx, filepath.Join(cp.BinDir(), "helm"), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+dir, "HELM_CONFIG_HOME="+dir, "HELM_DATA_HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		w.T.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// getReplicaSet fails unless rs (same UID) still exists.
func (w *world) getReplicaSet(rs *appsv1.ReplicaSet) {
	w.T.Helper()
	if got := w.get(rs); got.UID != rs.UID {
		w.T.Fatalf("ReplicaSet %s replaced", rs.Name)
	}
}

// configName is the revision name the chart renders for config: the one ConfigMap of the
// namespace whose data is that config.
func configName(w *world, config string) string {
	w.T.Helper()
	var name string
	w.Eventually("the revision of config "+config, func() error {
		list, err := w.Kube.CoreV1().ConfigMaps(w.NS).List(w.Ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, cm := range list.Items {
			if cm.Data["config.yaml"] == config {
				name = cm.Name
				return nil
			}
		}
		return fmt.Errorf("no ConfigMap with config %s", config)
	})
	return name
}

// writeChart writes the chart users write for hash-named config: a ConfigMap named after
// its content's checksum, opted in, with the keep policy when .Values.keep, and a
// Deployment (revisionHistoryLimit 1) mounting it.
func writeChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "web")
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"values.yaml": "config: v1\nkeep: true\n",
		"templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config-{{ .Values.config | sha256sum | trunc 10 }}
  labels:
    configmap-attacher.io/revision: "true"
  {{- if .Values.keep }}
  annotations:
    helm.sh/resource-policy: keep
  {{- end }}
data:
  config.yaml: {{ .Values.config | quote }}
`,
		"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  revisionHistoryLimit: 1
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 0
      containers:
        - name: app
          image: registry.invalid/app:1
          env:
            - name: VERSION
              value: "1"
          volumeMounts:
            - name: config
              mountPath: /etc/app
      volumes:
        - name: config
          configMap:
            name: web-config-{{ .Values.config | sha256sum | trunc 10 }}
`,
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
