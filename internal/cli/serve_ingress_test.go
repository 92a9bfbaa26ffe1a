package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// `serve --watch --gc-interval` attaches new ReplicaSets without any Argo Events and sweeps
// an orphaned revision, then stops cleanly.
func TestServeWatchAndSweep(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ctx := context.Background()
	kc := cp.Client()
	ns := newNamespace(t, cp)
	for _, name := range []string{"used-config", "orphan-config"} {
		_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{core.LabelRevision: "true", core.LabelFamily: name}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	var errOut testfix.SyncBuffer
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(runCtx, []string{"serve", "--kubeconfig", cp.Kubeconfig(), "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
			"--watch", "--gc-interval", "1s", "--gc-min-age", "1s", "--gc-keep", "0", "--log-level", "warn"},
			cli.Streams{In: strings.NewReader(""), Out: &errOut, Err: &errOut})
	}()
	zero := int32(0)
	labels := map[string]string{"app": "w"}
	rs, err := kc.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "w-1"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "i", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "used-config"}}}}}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	controlplane.Eventually(t, 60*time.Second, "the watcher to attach used-config", func() error {
		select {
		case code := <-done:
			t.Fatalf("serve exited with %d: %s", code, errOut.String())
		default:
		}
		cm, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, "used-config", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, o := range cm.OwnerReferences {
			if o.UID == rs.UID {
				return nil
			}
		}
		return fmt.Errorf("not attached yet")
	})
	controlplane.Eventually(t, 60*time.Second, "the sweep to collect orphan-config", func() error {
		_, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, "orphan-config", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	_, err = kc.CoreV1().ConfigMaps(ns).Get(ctx, "used-config", metav1.GetOptions{})
	assert.NoError(t, err, "a referenced revision is never collected")
	controlplane.Eventually(t, 30*time.Second, "Kubernetes Events for the attach and the collection", func() error {
		evs, err := kc.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		for _, ev := range evs.Items {
			seen[ev.Reason+"/"+ev.InvolvedObject.Name] = true
		}
		if !seen["Attached/used-config"] || !seen["Collected/orphan-config"] {
			return fmt.Errorf("events seen: %v", seen)
		}
		return nil
	})
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, errOut.String())
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop")
	}
}

// A trigger with `operation: gc` sweeps the event's namespace: a dry run reports what a
// real run then deletes.
func TestServeOperationGC(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	ctx := context.Background()
	kc := cp.Client()
	ns := newNamespace(t, cp)
	_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "stale-config",
		Labels: map[string]string{core.LabelRevision: "true"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	zero := int32(0)
	labels := map[string]string{"app": "g"}
	_, err = kc.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "g-1"},
		Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "c", Image: "i"}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port, err := controlplane.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var errOut testfix.SyncBuffer
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(runCtx, []string{"serve", "--kubeconfig", cp.Kubeconfig(), "--grpc-addr", "-", "--http-addr", addr, "--metrics-addr", "127.0.0.1:0", "--gc-min-age", "1s", "--gc-keep", "0", "--log-level", "warn"},
			cli.Streams{In: strings.NewReader(""), Out: &errOut, Err: &errOut})
	}()
	payload := fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"namespace":%q,"name":"g-1"}}`, ns)
	post := func(query string) (int, map[string]any) {
		resp, err := http.Post("http://"+addr+"/?"+query, "application/json", strings.NewReader(payload))
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}
	outcomes := func(body map[string]any) map[string]string {
		out := map[string]string{}
		g, _ := body["gc"].(map[string]any)
		results, _ := g["results"].([]any)
		for _, r := range results {
			m := r.(map[string]any)
			out[fmt.Sprint(m["name"])] = fmt.Sprint(m["outcome"])
		}
		return out
	}
	// The grace period is judged by the apiserver's clock, which serve estimates from the
	// Date header of its answers and never ahead of it (kube.ServerClock): up to a second
	// and an answer's latency behind. So wait for the dry run to find the revision old
	// enough, rather than a fixed time past --gc-min-age.
	gcUntil := func(query, want string) map[string]any {
		var body map[string]any
		controlplane.Eventually(t, 60*time.Second, query+": "+want, func() error {
			code, b := post(query)
			if code != http.StatusOK {
				return fmt.Errorf("status %d: %v (%s)", code, b, errOut.String())
			}
			body = b
			if got := outcomes(b)["stale-config"]; got != want {
				return fmt.Errorf("stale-config %s: %v", got, b)
			}
			return nil
		})
		return body
	}
	body := gcUntil("operation=gc&dryRun=true", "would-delete")
	assert.Equal(t, map[string]string{"stale-config": "would-delete"}, outcomes(body), "%v", body)
	_, err = kc.CoreV1().ConfigMaps(ns).Get(ctx, "stale-config", metav1.GetOptions{})
	assert.NoError(t, err, "a dry run deletes nothing")
	body = gcUntil("operation=gc", "deleted")
	assert.Equal(t, map[string]string{"stale-config": "deleted"}, outcomes(body), "%v", body)
	_, err = kc.CoreV1().ConfigMaps(ns).Get(ctx, "stale-config", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the real run deletes what the dry run reported")
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, errOut.String())
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop")
	}
}
