package argoevents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argoevents"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/natsserver"
)

// cp is the local control plane shared by this package's tests.
var cp *controlplane.ControlPlane

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	os.Exit(controlplane.TestMain(m, &cp))
}

// testTimeout bounds every end-to-end test; the processes are stopped when it ends.
const testTimeout = 3 * time.Minute

var rolloutGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

// env is one end-to-end test's world: a namespace on the shared control plane, a NATS
// JetStream EventBus of its own, and the Argo Events processes it started.
type env struct {
	t      *testing.T
	ctx    context.Context
	cp     *controlplane.ControlPlane
	nats   *natsserver.Server
	ns     string
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	root   string
	logDir string
	// grpcAddr and httpURL are where the in-process server listens (set by the test).
	grpcAddr string
	httpURL  string
	// httpAuth: the in-process HTTP receiver requires argoevents.TestHTTPToken.
	httpAuth bool
}

// aim points the Sensor's triggers at the in-process server (the only test overrides of
// a shipped Sensor).
func (e *env) aim(s *v1alpha1.Sensor) *v1alpha1.Sensor {
	e.t.Helper()
	if e.grpcAddr != "" {
		argoevents.SetCustomTriggerServer(s, e.grpcAddr)
	}
	if e.httpURL != "" {
		if _, err := argoevents.SetHTTPTriggerURL(s, e.httpURL); err != nil {
			e.t.Fatal(err)
		}
	}
	if e.httpAuth {
		// The Secret the Sensor's secureHeaders read, where Argo Events would mount it.
		if _, err := argoevents.ProvideSecureHeaders(s, "Bearer "+argoevents.TestHTTPToken); err != nil {
			e.t.Fatal(err)
		}
	} else {
		argoevents.DropSecureHeaders(s)
	}
	return s
}

// newEnv starts NATS and creates a fresh namespace. Everything is stopped when the test
// ends; the Argo Events logs are printed if it failed.
func newEnv(t *testing.T) *env {
	t.Helper()
	c := controlplane.Require(t, cp)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	root, err := argoevents.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := natsserver.Start(ctx, natsserver.Options{})
	if err != nil {
		t.Fatalf("start NATS: %v", err)
	}
	t.Cleanup(ns.Stop)
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: ctx, cp: c, nats: ns, kube: c.Client(), dyn: dyn, root: root, logDir: t.TempDir()}
	e.ns = "e2e-" + rand.String(6)
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return e
}

// eventSource loads the shipped EventSource, narrowed to the test namespace.
func (e *env) eventSource() *v1alpha1.EventSource {
	e.t.Helper()
	es, err := argoevents.LoadEventSourceFile(filepath.Join(e.root, argoevents.EventSourceFile))
	if err != nil {
		e.t.Fatal(err)
	}
	argoevents.SetWatchedNamespace(es, e.ns)
	return es
}

// sensor loads a shipped Sensor.
func (e *env) sensor(file string) *v1alpha1.Sensor {
	e.t.Helper()
	s, err := argoevents.LoadSensorFile(filepath.Join(e.root, file))
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// start runs an Argo Events process for the object and waits until its log shows ready;
// it is stopped at cleanup and its log is printed if the test failed.
func (e *env) start(cfg argoevents.Config, ready string) *argoevents.Process {
	e.t.Helper()
	cfg.EventBusURL = e.nats.ClientURL()
	cfg.Kubeconfig = e.cp.Kubeconfig()
	var name string
	if cfg.EventSource != nil {
		name = "eventsource-" + cfg.EventSource.Name
	} else {
		name = "sensor-" + cfg.Sensor.Name
	}
	cfg.LogFile = filepath.Join(e.logDir, name+".log")
	for i := 2; fileExists(cfg.LogFile); i++ { // a restart gets a log of its own
		cfg.LogFile = filepath.Join(e.logDir, fmt.Sprintf("%s-%d.log", name, i))
	}
	started := time.Now()
	p, err := argoevents.Start(e.ctx, cfg)
	if err != nil {
		e.t.Fatalf("start %s: %v", name, err)
	}
	e.t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			e.t.Errorf("stop %s: %v", p.Name(), err)
		}
		if e.t.Failed() {
			e.t.Logf("---- %s log (%s) ----\n%s", p.Name(), p.LogFile(), p.Tail(150))
		}
	})
	wctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	if err := p.WaitForLog(wctx, ready); err != nil {
		e.t.Fatalf("%v\n%s", err, p.Tail(60))
	}
	e.t.Logf("%s ready in %s", p.Name(), time.Since(started).Round(time.Millisecond))
	return p
}

func fileExists(path string) bool { _, err := os.Stat(path); return err == nil }

// Log lines that say a process is ready for the test to create objects.
const (
	// eventSourceReady: the resource informer is being set up (it lists existing objects
	// first, so an object created right after is seen either way).
	eventSourceReady = "setting up informer factory"
	// sensorReady: the durable pull consumer exists (it delivers only new messages).
	sensorReady = "Subscribing to subject"
)

// createRolloutReplicaSet creates a Rollout and a ReplicaSet it controls, whose pod
// template uses configMap through envFrom (no Argo Rollouts controller runs).
func (e *env) createRolloutReplicaSet(name, configMap string) *appsv1.ReplicaSet {
	e.t.Helper()
	ro := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "argoproj.io/v1alpha1",
		"kind":       "Rollout",
		"metadata":   map[string]any{"name": name, "namespace": e.ns},
		"spec": map[string]any{
			"replicas": int64(0),
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": name}},
				"spec": map[string]any{"containers": []any{map[string]any{
					"name": "app", "image": "registry.invalid/app:1",
					"envFrom": []any{map[string]any{"configMapRef": map[string]any{"name": configMap}}},
				}}},
			},
			"strategy": map[string]any{"canary": map[string]any{}},
		},
	}}
	created, err := e.dyn.Resource(rolloutGVR).Namespace(e.ns).Create(e.ctx, ro, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create Rollout: %v", err)
	}
	yes, zero := true, int32(0)
	labels := map[string]string{"app": name, "rollouts-pod-template-hash": "abc123"}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-abc123", Namespace: e.ns, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: name,
				UID: created.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes,
			}},
		},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "app", Image: "registry.invalid/app:1",
					EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: configMap},
					}}},
				}}},
			},
		},
	}
	out, err := e.kube.AppsV1().ReplicaSets(e.ns).Create(e.ctx, rs, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create ReplicaSet: %v", err)
	}
	return out
}

// createDeployment creates a Deployment whose pod template uses configMap through a
// volume; the real deployment controller creates its ReplicaSet.
func (e *env) createDeployment(name, configMap string) *appsv1.Deployment {
	e.t.Helper()
	zero := int32(0)
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &zero,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "web", Image: "registry.invalid/web:1",
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/web"}}}},
					Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: configMap}},
					}}},
				},
			},
		},
	}
	out, err := e.kube.AppsV1().Deployments(e.ns).Create(e.ctx, d, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create Deployment: %v", err)
	}
	return out
}

// createRevision creates an opted-in ConfigMap (label configmap-attacher.io/revision=true).
func (e *env) createRevision(name string) *corev1.ConfigMap {
	e.t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"configmap-attacher.io/revision": "true"}},
		Data:       map[string]string{"LEVEL": "1"},
	}
	out, err := e.kube.CoreV1().ConfigMaps(e.ns).Create(e.ctx, cm, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create ConfigMap: %v", err)
	}
	return out
}

// resourceEventData is Argo Events' resource event data, as the shipped Sensors rebuild it.
type resourceEventData struct {
	Type     string            `json:"type"`
	Body     json.RawMessage   `json:"body"`
	Group    string            `json:"group"`
	Version  string            `json:"version"`
	Resource string            `json:"resource"`
	Metadata map[string]string `json:"metadata"`
}

// checkPayload verifies a payload is the resource event data of an ADD of rs.
func checkPayload(payload []byte, rs *appsv1.ReplicaSet) error {
	var d resourceEventData
	if err := json.Unmarshal(payload, &d); err != nil {
		return fmt.Errorf("payload is not resource event data: %w: %s", err, payload)
	}
	var body appsv1.ReplicaSet
	if err := json.Unmarshal(d.Body, &body); err != nil {
		return fmt.Errorf("payload body is not a ReplicaSet object (useRawData lost?): %w: %s", err, clip(d.Body))
	}
	switch {
	case d.Type != "ADD" || d.Group != "apps" || d.Version != "v1" || d.Resource != "replicasets":
		return fmt.Errorf("payload header = %s %s/%s %s, want ADD apps/v1 replicasets", d.Type, d.Group, d.Version, d.Resource)
	case body.Namespace != rs.Namespace || body.Name != rs.Name || body.UID != rs.UID:
		return fmt.Errorf("payload body is %s/%s (%s), want %s/%s (%s)", body.Namespace, body.Name, body.UID, rs.Namespace, rs.Name, rs.UID)
	case d.Metadata["cluster"] == "":
		return fmt.Errorf("payload metadata has no cluster: %v", d.Metadata)
	}
	return nil
}

func clip(b []byte) string {
	s := string(b)
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return strings.TrimSpace(s)
}
