package cluster

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	eventsv1 "github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const multiDir = "../../deploy/multicluster"

func readDocs(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(d) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func strict(t *testing.T, doc []byte, into any) {
	t.Helper()
	require.NoError(t, yaml.UnmarshalStrict(doc, into), string(doc))
}

// TestHubManifests checks deploy/multicluster: member EventSources differ from the base
// EventSource only by metadata.cluster, each has an Argo CD cluster Secret of that name
// which the registry accepts, and the hub Sensor is the shipped gRPC Sensor.
func TestHubManifests(t *testing.T) {
	var base eventsv1.EventSource
	strict(t, readDocs(t, "../../eventsource/replicasets.eventsource.yaml")[0], &base)

	members, err := filepath.Glob(filepath.Join(multiDir, "member", "eventsource-*.yaml"))
	require.NoError(t, err)
	require.Len(t, members, 2)
	var clusters []string
	for _, f := range members {
		t.Run(filepath.Base(f), func(t *testing.T) {
			var es eventsv1.EventSource
			strict(t, readDocs(t, f)[0], &es)
			assert.Equal(t, base.Name, es.Name, "the hub Sensor's dependencies name this EventSource")
			want := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "eventsource-"), ".yaml")
			require.Len(t, es.Spec.Resource, len(base.Spec.Resource))
			for name, r := range es.Spec.Resource {
				assert.Equal(t, want, r.Metadata["cluster"], name)
				b, ok := base.Spec.Resource[name]
				require.True(t, ok, name)
				r.Metadata, b.Metadata = nil, nil
				assert.Equal(t, b, r, "%s differs from the base EventSource beyond metadata.cluster", name)
			}
			clusters = append(clusters, want)
		})
	}

	var bus eventsv1.EventBus
	strict(t, readDocs(t, filepath.Join(multiDir, "member", "eventbus.yaml"))[0], &bus)
	require.NotNil(t, bus.Spec.JetStreamExotic)
	assert.Equal(t, "default", bus.Name, "member EventSources use the EventBus named default")

	// Every member has an Argo CD cluster Secret named like its metadata.cluster, and the
	// registry accepts it once the placeholders are filled in.
	placeholder := regexp.MustCompile(`"<[^>]*>"`)
	// member-b's credentials come from "aws": the shipped hub values allow no plugin, so
	// its Secret is refused; allowed by absolute path as the values' comment says, the
	// Secret's bare "aws" is accepted once $PATH resolves it to that file.
	bin := t.TempDir()
	aws := filepath.Join(bin, "aws")
	require.NoError(t, os.WriteFile(aws, []byte("#!/bin/sh\n"), 0o755))
	t.Setenv("PATH", bin)
	shippedPolicy, err := NewExecPolicy(hubExecPlugins(t, filepath.Join(multiDir, "hub", "values.yaml")), 0, "")
	require.NoError(t, err)
	allowed, err := NewExecPolicy([]string{aws}, 0, "")
	require.NoError(t, err)
	var secretNames, refused []string
	for _, doc := range readDocs(t, filepath.Join(multiDir, "hub", "argocd-cluster-secrets.yaml")) {
		var s corev1.Secret
		strict(t, doc, &s)
		s.StringData["config"] = placeholder.ReplaceAllString(s.StringData["config"], `"dG9rZW4="`)
		if _, err := SpecFromSecretAllowing(&s, shippedPolicy); err != nil {
			require.ErrorIs(t, err, ErrExecNotAllowed)
			refused = append(refused, s.Name)
		}
		sp, err := SpecFromSecretAllowing(&s, allowed)
		require.NoError(t, err)
		secretNames = append(secretNames, sp.Name)
	}
	assert.Equal(t, []string{"member-b"}, refused, "the shipped hub values allow no credential plugin")
	sort.Strings(clusters)
	sort.Strings(secretNames)
	assert.Equal(t, clusters, secretNames)

	// The hub Sensor is the shipped one (it forwards metadata, hence metadata.cluster).
	var hub, shipped map[string]any
	strict(t, readDocs(t, filepath.Join(multiDir, "hub", "sensor.yaml"))[0], &hub)
	strict(t, readDocs(t, "../../sensor/grpc-trigger.sensor.yaml")[0], &shipped)
	assert.Equal(t, shipped, hub)
	raw, err := os.ReadFile(filepath.Join(multiDir, "hub", "sensor.yaml"))
	require.NoError(t, err)
	assert.True(t, bytes.Contains(raw, []byte("dest: metadata")))

	// The hub values only use keys the chart has.
	var chart, values map[string]any
	b, err := os.ReadFile("../../deploy/helm/configmap-attacher/values.yaml")
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &chart))
	b, err = os.ReadFile(filepath.Join(multiDir, "hub", "values.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &values))
	for section, v := range values {
		require.Contains(t, chart, section)
		for k := range v.(map[string]any) {
			assert.Contains(t, chart[section], k, "chart value %s.%s", section, k)
		}
	}
	assert.Equal(t, true, values["argocdClusters"].(map[string]any)["enabled"])
}

// hubExecPlugins returns flags.allow-exec-plugin of the hub's Helm values.
func hubExecPlugins(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var v struct {
		Flags struct {
			AllowExecPlugin []string `json:"allow-exec-plugin"`
		} `json:"flags"`
	}
	require.NoError(t, yaml.Unmarshal(b, &v))
	return v.Flags.AllowExecPlugin
}
