package deploytest

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"
	sensorreconciler "github.com/argoproj/argo-events/pkg/reconciler/sensor"
	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"
)

// Shipped Sensor files, relative to the repository root.
const (
	grpcSensorFile = "sensor/grpc-trigger.sensor.yaml"
	httpSensorFile = "sensor/http-trigger.sensor.yaml"
)

// loadSensor decodes a shipped Sensor strictly into Argo Events' own type.
func loadSensor(t testing.TB, file string) *v1alpha1.Sensor {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), file))
	if err != nil {
		t.Fatal(err)
	}
	s := &v1alpha1.Sensor{}
	if err := yaml.UnmarshalStrict(b, s); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return s
}

// sensorPod is the pod template the pinned Argo Events sensor controller builds for s
// (its own reconciler, on a fake client holding s and a ready JetStream EventBus), and the
// namespace it runs in.
func sensorPod(t testing.TB, s *v1alpha1.Sensor) (string, corev1.PodTemplateSpec) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	name := v1alpha1.DefaultEventBusName
	if s.Spec.EventBusName != "" {
		name = s.Spec.EventBusName
	}
	bus := &v1alpha1.EventBus{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace},
		Spec: v1alpha1.EventBusSpec{JetStream: &v1alpha1.JetStreamBus{Version: "latest"}}}
	bus.Status.InitConditions()
	bus.Status.MarkDeployed("Deployed", "")
	bus.Status.MarkConfigured()
	bus.Status.Config.JetStream = &v1alpha1.JetStreamConfig{URL: "nats://eventbus-" + name + "-js-svc:4222"}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(s.DeepCopy(), bus).
		WithStatusSubresource(&v1alpha1.Sensor{}, &v1alpha1.EventBus{}).Build()
	r := sensorreconciler.NewReconciler(c, scheme, "quay.io/argoproj/argo-events:v1.9.11", zap.NewNop().Sugar())
	// The first pass adds the finalizer, so its status update conflicts; the controller
	// would requeue, as here.
	var err error
	for range 3 {
		if _, err = r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}}); !apierrors.IsConflict(err) {
			break
		}
	}
	if err != nil {
		t.Fatalf("the Argo Events sensor controller refuses Sensor %s: %v", s.Name, err)
	}
	var deps appsv1.DeploymentList
	if err := c.List(context.Background(), &deps, client.InNamespace(s.Namespace)); err != nil {
		t.Fatal(err)
	}
	if len(deps.Items) != 1 {
		t.Fatalf("the sensor controller made %d Deployments for %s, want 1", len(deps.Items), s.Name)
	}
	return s.Namespace, deps.Items[0].Spec.Template
}

// mountedSecretFile returns the path in the pod's first container where key of Secret
// name appears, or "".
func mountedSecretFile(pod corev1.PodTemplateSpec, name, key string) string {
	vols := map[string]*corev1.SecretVolumeSource{}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			vols[v.Name] = v.Secret
		}
	}
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		sv := vols[m.Name]
		if sv == nil || sv.SecretName != name {
			continue
		}
		if len(sv.Items) == 0 {
			return path.Join(m.MountPath, key)
		}
		for _, it := range sv.Items {
			if it.Key == key {
				return path.Join(m.MountPath, it.Path)
			}
		}
	}
	return ""
}
