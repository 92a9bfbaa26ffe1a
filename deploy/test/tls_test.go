package deploytest

import (
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"
	sharedutil "github.com/argoproj/argo-events/pkg/shared/util"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// commentedExample returns the YAML a shipped file shows in a comment: the lines
// "#   ..." that follow the first line containing marker, without the "#   ".
func commentedExample(t *testing.T, file, marker string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), file))
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`^\s*#   (.*)$`)
	var out []string
	started := false
	for _, l := range strings.Split(string(b), "\n") {
		if !started {
			started = strings.Contains(l, marker)
			continue
		}
		m := line.FindStringSubmatch(l)
		if m == nil {
			break
		}
		out = append(out, m[1])
	}
	if len(out) == 0 {
		t.Fatalf("%s shows no example after %q", file, marker)
	}
	return []byte(strings.Join(out, "\n"))
}

// checkMounted fails unless the Sensor's pod, as the pinned controller builds it, has the
// Secret key where sensor-service reads it.
func checkMounted(t *testing.T, pod corev1.PodTemplateSpec, sel *corev1.SecretKeySelector) {
	t.Helper()
	want, err := sharedutil.GetSecretVolumePath(sel)
	if err != nil {
		t.Fatal(err)
	}
	if got := mountedSecretFile(pod, sel.Name, sel.Key); got != want {
		t.Errorf("key %s of Secret %s is at %q in the Sensor's pod; sensor-service reads %q", sel.Key, sel.Name, got, want)
	}
}

// TestSensorTLSExamples: the TLS settings the shipped Sensors show in their comments are
// valid Argo Events fields, the pinned controller accepts the Sensors with them and
// mounts the CA Secret where sensor-service reads it, and the chart's cert-manager
// Certificate names the hosts the Sensors connect to (the gRPC client checks the
// serverURL's host).
func TestSensorTLSExamples(t *testing.T) {
	certs := ofKind(renderObjects(t, requiredValues+"tls: {enabled: true, certManager: {enabled: true, issuerRef: {name: ca}}}"), "Certificate")
	if len(certs) != 1 {
		t.Fatalf("%d Certificates rendered, want 1", len(certs))
	}
	dnsNames, _, _ := unstructured.NestedStringSlice(certs[0].Object, "spec", "dnsNames")
	named := func(t *testing.T, rawURL string) {
		t.Helper()
		if !strings.Contains(rawURL, "://") {
			rawURL = "grpc://" + rawURL
		}
		u, err := url.Parse(rawURL)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(dnsNames, u.Hostname()) {
			t.Errorf("the Certificate's DNS names %v do not include %s, which the Sensor connects to", dnsNames, u.Hostname())
		}
	}

	t.Run("gRPC: secure and certSecret", func(t *testing.T) {
		var ex v1alpha1.CustomTrigger
		if err := yaml.UnmarshalStrict(commentedExample(t, grpcSensorFile, "replace the line below with"), &ex); err != nil {
			t.Fatalf("the example is not a custom trigger's fields: %v", err)
		}
		if !ex.Secure || ex.CertSecret == nil {
			t.Fatalf("the example sets secure %v, certSecret %v", ex.Secure, ex.CertSecret)
		}
		s := loadSensor(t, grpcSensorFile)
		for _, trig := range s.Spec.Triggers {
			trig.Template.CustomTrigger.Secure, trig.Template.CustomTrigger.CertSecret = ex.Secure, ex.CertSecret
			named(t, trig.Template.CustomTrigger.ServerURL)
		}
		_, pod := sensorPod(t, s)
		checkMounted(t, pod, ex.CertSecret)
	})
	t.Run("HTTP: https and tls.caCertSecret", func(t *testing.T) {
		var ex struct {
			TLS *v1alpha1.TLSConfig `json:"tls"`
		}
		if err := yaml.UnmarshalStrict(commentedExample(t, httpSensorFile, "add to each http: trigger"), &ex); err != nil {
			t.Fatalf("the example is not an HTTP trigger's tls field: %v", err)
		}
		if ex.TLS == nil || ex.TLS.CACertSecret == nil {
			t.Fatalf("the example sets no tls.caCertSecret: %+v", ex.TLS)
		}
		s := loadSensor(t, httpSensorFile)
		for _, trig := range s.Spec.Triggers {
			h := trig.Template.HTTP
			h.URL = strings.Replace(h.URL, "http://", "https://", 1)
			h.TLS = ex.TLS
			named(t, h.URL)
		}
		_, pod := sensorPod(t, s)
		checkMounted(t, pod, ex.TLS.CACertSecret)
	})
}
