// Package argoevents runs the real Argo Events binaries (eventsource-service and
// sensor-service) as local processes against a local control plane and an embedded NATS
// JetStream EventBus, and loads the EventSource and Sensor objects this project ships
// under eventsource/ and sensor/ into Argo Events' own API types.
package argoevents

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Paths of the shipped objects, relative to the repository root.
const (
	// EventSourceFile is the resource EventSource for ReplicaSet ADD events.
	EventSourceFile = "eventsource/replicasets.eventsource.yaml"
	// GRPCSensorFile is the Sensor using the gRPC custom trigger.
	GRPCSensorFile = "sensor/grpc-trigger.sensor.yaml"
	// HTTPSensorFile is the Sensor using Argo Events' HTTP trigger.
	HTTPSensorFile = "sensor/http-trigger.sensor.yaml"
)

// LoadEventSource decodes a YAML or JSON EventSource strictly (unknown fields are an
// error, so a typo in a shipped file fails the tests) and validates it with Argo Events'
// own validation.
func LoadEventSource(data []byte) (*v1alpha1.EventSource, error) {
	es := &v1alpha1.EventSource{}
	if err := yaml.UnmarshalStrict(data, es); err != nil {
		return nil, fmt.Errorf("decode EventSource: %w", err)
	}
	if es.Kind != "EventSource" {
		return nil, fmt.Errorf("decode EventSource: kind is %q", es.Kind)
	}
	if err := v1alpha1.ValidateEventSource(es); err != nil {
		return nil, fmt.Errorf("validate EventSource %s: %w", es.Name, err)
	}
	return es, nil
}

// LoadSensor decodes a YAML or JSON Sensor strictly and checks the basics the
// sensor-service relies on (a name, dependencies and triggers).
func LoadSensor(data []byte) (*v1alpha1.Sensor, error) {
	s := &v1alpha1.Sensor{}
	if err := yaml.UnmarshalStrict(data, s); err != nil {
		return nil, fmt.Errorf("decode Sensor: %w", err)
	}
	switch {
	case s.Kind != "Sensor":
		return nil, fmt.Errorf("decode Sensor: kind is %q", s.Kind)
	case s.Name == "":
		return nil, errors.New("decode Sensor: no metadata.name")
	case len(s.Spec.Dependencies) == 0:
		return nil, fmt.Errorf("sensor %s: no dependencies", s.Name)
	case len(s.Spec.Triggers) == 0:
		return nil, fmt.Errorf("sensor %s: no triggers", s.Name)
	}
	for i, t := range s.Spec.Triggers {
		if t.Template == nil || t.Template.Name == "" {
			return nil, fmt.Errorf("sensor %s: trigger %d has no template name", s.Name, i)
		}
	}
	return s, nil
}

// LoadEventSourceFile reads and decodes an EventSource file (see LoadEventSource).
func LoadEventSourceFile(path string) (*v1alpha1.EventSource, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read EventSource: %w", err)
	}
	es, err := LoadEventSource(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return es, nil
}

// LoadSensorFile reads and decodes a Sensor file (see LoadSensor).
func LoadSensorFile(path string) (*v1alpha1.Sensor, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read Sensor: %w", err)
	}
	s, err := LoadSensor(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// RepoRoot finds the repository root (the directory holding go.mod) from the working
// directory upwards; tests run in their package directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("repo root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repo root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// SetCustomTriggerServer points every custom (gRPC) trigger of s at serverURL.
// It returns how many triggers it changed.
func SetCustomTriggerServer(s *v1alpha1.Sensor, serverURL string) int {
	n := 0
	for i := range s.Spec.Triggers {
		if t := s.Spec.Triggers[i].Template; t != nil && t.CustomTrigger != nil {
			t.CustomTrigger.ServerURL = serverURL
			n++
		}
	}
	return n
}

// SensorSecretsDir is where Argo Events mounts the Secrets a Sensor references, and where
// sensor-service reads them: SensorSecretsDir/NAME/KEY.
const SensorSecretsDir = "/argo-events/secrets"

// TestHTTPToken is the bearer token of local runs whose HTTP receiver requires one. Every
// local sensor-service reads a Secret from the same host path (SensorSecretsDir), so all
// runs on a machine use this one token.
const TestHTTPToken = "configmap-attacher-local-test-token"

// secureHeaderSecrets returns the Secret keys the secureHeaders of s's HTTP triggers read.
func secureHeaderSecrets(s *v1alpha1.Sensor) []*corev1.SecretKeySelector {
	var out []*corev1.SecretKeySelector
	for i := range s.Spec.Triggers {
		t := s.Spec.Triggers[i].Template
		if t == nil || t.HTTP == nil {
			continue
		}
		for _, h := range t.HTTP.SecureHeaders {
			if h != nil && h.ValueFrom != nil && h.ValueFrom.SecretKeyRef != nil {
				out = append(out, h.ValueFrom.SecretKeyRef)
			}
		}
	}
	return out
}

// ProvideSecureHeaders makes the Secrets that the secureHeaders of s's HTTP triggers read
// hold value, where a local sensor-service reads them (SensorSecretsDir/NAME/KEY, written
// atomically; needs root), as Argo Events' controller would mount them into the Sensor's
// pod. It returns how many it wrote.
func ProvideSecureHeaders(s *v1alpha1.Sensor, value string) (int, error) {
	refs := secureHeaderSecrets(s)
	for _, ref := range refs {
		dir := filepath.Join(SensorSecretsDir, ref.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return 0, fmt.Errorf("sensor secret %s: %w", ref.Name, err)
		}
		tmp, err := os.CreateTemp(dir, "."+ref.Key+"-")
		if err != nil {
			return 0, fmt.Errorf("sensor secret %s: %w", ref.Name, err)
		}
		_, werr := tmp.WriteString(value)
		cerr := tmp.Close()
		if err := errors.Join(werr, cerr, os.Rename(tmp.Name(), filepath.Join(dir, ref.Key))); err != nil {
			_ = os.Remove(tmp.Name())
			return 0, fmt.Errorf("sensor secret %s key %s: %w", ref.Name, ref.Key, err)
		}
	}
	return len(refs), nil
}

// DropSecureHeaders removes the secureHeaders of every HTTP trigger of s (for a receiver
// that requires no token). It returns how many triggers had some.
func DropSecureHeaders(s *v1alpha1.Sensor) int {
	n := 0
	for i := range s.Spec.Triggers {
		if t := s.Spec.Triggers[i].Template; t != nil && t.HTTP != nil && len(t.HTTP.SecureHeaders) > 0 {
			t.HTTP.SecureHeaders = nil
			n++
		}
	}
	return n
}

// SetHTTPTriggerURL replaces the scheme and host of every HTTP trigger URL of s with base
// (e.g. http://127.0.0.1:8080), keeping the path and query. It returns how many it changed.
func SetHTTPTriggerURL(s *v1alpha1.Sensor, base string) (int, error) {
	n := 0
	for i := range s.Spec.Triggers {
		t := s.Spec.Triggers[i].Template
		if t == nil || t.HTTP == nil {
			continue
		}
		u, err := rebase(t.HTTP.URL, base)
		if err != nil {
			return n, fmt.Errorf("trigger %s: %w", t.Name, err)
		}
		t.HTTP.URL = u
		n++
	}
	return n, nil
}

// SetWatchedNamespace narrows every resource event of es to namespace.
func SetWatchedNamespace(es *v1alpha1.EventSource, namespace string) {
	for k, r := range es.Spec.Resource {
		r.Namespace = namespace
		es.Spec.Resource[k] = r
	}
}

// SetClusterMetadata sets the metadata "cluster" entry of every resource event of es.
func SetClusterMetadata(es *v1alpha1.EventSource, cluster string) {
	for k, r := range es.Spec.Resource {
		if r.Metadata == nil {
			r.Metadata = map[string]string{}
		}
		r.Metadata["cluster"] = cluster
		es.Spec.Resource[k] = r
	}
}
