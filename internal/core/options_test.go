package core_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

func TestParseSpec(t *testing.T) {
	cases := []struct {
		name      string
		spec      map[string]string
		wantField string // empty: valid
		check     func(t *testing.T, o core.Options)
	}{
		{name: "empty spec gives defaults", spec: nil, check: func(t *testing.T, o core.Options) {
			assert.Equal(t, core.OperationAttach, o.Operation)
			assert.True(t, o.Discover)
			assert.False(t, o.IncludeSecrets)
			assert.False(t, o.DryRun)
			assert.Equal(t, core.DefaultSelector, o.Selector.String())
		}},
		{name: "every key", spec: map[string]string{"operation": "gc", "configMaps": "a, b,,a", "secrets": "s", "discover": "false",
			"selector": "team=x", "includeSecrets": "true", "cluster": "east", "namespace": "shop", "dryRun": "true"},
			check: func(t *testing.T, o core.Options) {
				assert.Equal(t, core.OperationGC, o.Operation)
				assert.Equal(t, []string{"a", "b"}, o.ConfigMaps)
				assert.Equal(t, []string{"s"}, o.Secrets)
				assert.False(t, o.Discover)
				assert.Equal(t, "team=x", o.Selector.String())
				assert.True(t, o.IncludeSecrets && o.DryRun)
				assert.Equal(t, "east", o.Cluster)
				assert.Equal(t, "shop", o.Namespace)
			}},
		{name: "unknown key", spec: map[string]string{"configmaps": "a"}, wantField: "configmaps"},
		{name: "bad operation", spec: map[string]string{"operation": "delete"}, wantField: "operation"},
		{name: "bad bool", spec: map[string]string{"dryRun": "yes please"}, wantField: "dryRun"},
		{name: "bad selector", spec: map[string]string{"selector": "a in (b"}, wantField: "selector"},
		{name: "selector injection", spec: map[string]string{"selector": "x=y,z!=w)|(a"}, wantField: "selector"},
		{name: "cross-namespace name", spec: map[string]string{"configMaps": "kube-system/coredns"}, wantField: "configMaps"},
		{name: "name too long", spec: map[string]string{"secrets": strings.Repeat("a", 254)}, wantField: "secrets"},
		{name: "upper-case name", spec: map[string]string{"configMaps": "Config"}, wantField: "configMaps"},
		{name: "too many names", spec: map[string]string{"configMaps": strings.Repeat("a,", core.MaxListedNames+1)}, wantField: "configMaps"},
		{name: "bad namespace", spec: map[string]string{"namespace": "Kube_System"}, wantField: "namespace"},
		{name: "bad cluster", spec: map[string]string{"cluster": "east/1"}, wantField: "cluster"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o, err := core.ParseSpec(tc.spec)
			if tc.wantField != "" {
				require.ErrorIs(t, err, core.ErrInvalid)
				var fe *core.FieldError
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, tc.wantField, fe.Field)
				return
			}
			require.NoError(t, err)
			tc.check(t, o)
			again, err := core.ParseSpec(o.Spec())
			require.NoError(t, err, "the normalised spec parses again")
			assert.Equal(t, o.Spec(), again.Spec(), "normalising is idempotent")
		})
	}
}

func TestPodSpecRefs(t *testing.T) {
	opt := true
	spec := &corev1.PodSpec{
		Volumes: []corev1.Volume{
			{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}}}},
			{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s1", Optional: &opt}}},
			{Name: "csi", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: &corev1.LocalObjectReference{Name: "csi-creds"}}}},
			{Name: "azure", VolumeSource: corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{SecretName: "azure-creds", ShareName: "s"}}},
			{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "b"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "s2"}}},
			}}}},
		},
		InitContainers: []corev1.Container{{Name: "init", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "c"}, Optional: &opt}}}}},
		Containers: []corev1.Container{{Name: "app",
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s3"}}}},
			Env: []corev1.EnvVar{
				{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}, Key: "k"}}},
				{Name: "D", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "d"}, Key: "k", Optional: &opt}}},
				{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s4"}, Key: "k"}}},
				{Name: "PLAIN", Value: "x"},
			}}},
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "registry"}},
	}
	refs := core.PodSpecRefs(spec)
	got := map[string]bool{}
	for _, r := range refs {
		got[string(r.Kind)+"/"+r.Name] = r.Optional
	}
	assert.Equal(t, map[string]bool{
		"ConfigMap/a": false, "Secret/s1": true, "ConfigMap/b": false, "Secret/s2": false,
		"ConfigMap/c": true, "Secret/s3": false, "ConfigMap/d": true, "Secret/s4": false,
		"Secret/registry": false, "Secret/csi-creds": false, "Secret/azure-creds": false,
	}, got, "every reference once, optional only when every use is optional; pull and volume-plugin Secrets count")
	assert.Len(t, refs[0].From, 2, "a is used by a volume and an env var")
	lean := core.RefsOnly(spec)
	assert.Equal(t, refs, core.PodSpecRefs(&lean), "a lean cache keeps every reference")
}

func TestResultSummary(t *testing.T) {
	r := core.Result{Cluster: "east", Namespace: "shop", ReplicaSet: "web-1", Objects: []core.ObjectResult{
		{Kind: core.KindConfigMap, Name: "a", Outcome: core.OutcomeAttached},
		{Kind: core.KindConfigMap, Name: "b", Outcome: core.OutcomeAlreadyAttached},
		{Kind: core.KindConfigMap, Name: "c", Outcome: core.OutcomeAttached},
	}}
	assert.Equal(t, "east: ReplicaSet shop/web-1: 1 already-attached, 2 attached", r.Summary())
	assert.False(t, r.Failed())
	assert.Equal(t, 2, r.Writes())
}
