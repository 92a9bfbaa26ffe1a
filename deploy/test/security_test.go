package deploytest

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"
	sharedutil "github.com/argoproj/argo-events/pkg/shared/util"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
)

// renderObjects renders the chart (helm template) into objects.
func renderObjects(t testing.TB, values string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := decodeObjects(joinManifests(renderChart(t, templateMode, values)))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// renderError renders the chart and returns the error (nil when it renders).
func renderError(t testing.TB, values string) error {
	_, err := renderChartErr(templateMode, chartDir(t), releaseNamespace, values)
	return err
}

// parseServeArgs parses the rendered container arguments with serve's own flag set.
func parseServeArgs(t testing.TB, args []string) *cli.ServeOptions {
	t.Helper()
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("args %q do not start with serve", args)
	}
	o := cli.DefaultServeOptions()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		t.Fatalf("args %q: %v", args, err)
	}
	return &o
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// containerArgs returns the service container's arguments.
func containerArgs(t testing.TB, objs []*unstructured.Unstructured) []string {
	t.Helper()
	dep := find(objs, "Deployment", releaseName)
	if dep == nil {
		t.Fatal("no Deployment rendered")
	}
	cs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
	return args
}

// secretKey names a key of a Secret.
type secretKey struct{ name, key string }

// tokenVolume returns the Secret and key the Deployment mounts as the --http-token-file
// (nil when it passes none), failing when the argument and the mount disagree.
func tokenVolume(t testing.TB, objs []*unstructured.Unstructured) *secretKey {
	t.Helper()
	return secretFile(t, objs, "--http-token-file=")
}

// secretFile returns the Secret and key the Deployment mounts as the file the argument
// flag (e.g. "--http-token-file=") names (nil when it passes none), failing when the
// argument and the mount disagree.
func secretFile(t testing.TB, objs []*unstructured.Unstructured, flag string) *secretKey {
	t.Helper()
	var file string
	for _, a := range containerArgs(t, objs) {
		if v, ok := strings.CutPrefix(a, flag); ok {
			file = v
		}
	}
	spec, _, _ := unstructured.NestedMap(find(objs, "Deployment", releaseName).Object, "spec", "template", "spec")
	vols, _ := spec["volumes"].([]any)
	mounts, _ := nested(spec["containers"].([]any)[0].(map[string]any), "volumeMounts").([]any)
	var found *secretKey
	for _, m := range mounts {
		mm := m.(map[string]any)
		for _, v := range vols {
			vm := v.(map[string]any)
			if vm["name"] != mm["name"] || vm["secret"] == nil {
				continue
			}
			sec := vm["secret"].(map[string]any)
			items, _ := sec["items"].([]any)
			for _, it := range items {
				im := it.(map[string]any)
				if file != "" && mm["mountPath"].(string)+"/"+im["path"].(string) == file {
					found = &secretKey{sec["secretName"].(string), im["key"].(string)}
				}
			}
		}
	}
	if file != "" && found == nil {
		t.Fatalf("%s%s is not a mounted Secret key", flag, file)
	}
	return found
}

// scrapeToken returns the Secret key the ServiceMonitor sends as bearer token (nil: none).
func scrapeToken(t testing.TB, objs []*unstructured.Unstructured) *secretKey {
	t.Helper()
	sm := find(objs, "ServiceMonitor", releaseName)
	if sm == nil {
		t.Fatal("no ServiceMonitor rendered")
	}
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	auth, ok := eps[0].(map[string]any)["authorization"].(map[string]any)
	if !ok {
		return nil
	}
	if auth["type"] != "Bearer" {
		t.Errorf("ServiceMonitor authorization type %v, want Bearer", auth["type"])
	}
	c := auth["credentials"].(map[string]any)
	return &secretKey{c["name"].(string), c["key"].(string)}
}

// monitored turns the ServiceMonitor on (Prometheus admitted by the NetworkPolicy).
const monitored = `
serviceMonitor:
  enabled: true
networkPolicy:
  metricsFrom:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}
`

// TestChartHTTPAuth: the HTTP receiver requires a bearer token from a Secret the user
// names or the chart creates from a given token; with neither, rendering fails naming the
// values; the insecure opt-out is explicit. The ServiceMonitor sends the same token
// unless /metrics is public. Every rendering that succeeds is a valid serve command line.
func TestChartHTTPAuth(t *testing.T) {
	const chartSecret = releaseName + "-http-token"
	tests := []struct {
		name   string
		values string
		// errs: rendering fails with a message containing each of these.
		errs []string
		// volume is the Secret key mounted as --http-token-file (nil: no token).
		volume *secretKey
		// secrets are the namespaces of the token Secrets the chart creates.
		secrets []string
		// scrape is the ServiceMonitor's bearer token (nil: none).
		scrape *secretKey
	}{
		{name: "a Secret the user names", values: "httpAuth: {existingSecret: my-token}",
			volume: &secretKey{"my-token", "token"}, scrape: &secretKey{"my-token", "token"}},
		{name: "a key of that Secret", values: "httpAuth: {existingSecret: my-token, existingSecretKey: bearer}",
			volume: &secretKey{"my-token", "bearer"}, scrape: &secretKey{"my-token", "bearer"}},
		{name: "a Secret the chart creates from httpAuth.token", values: "httpAuth: {token: s3cr3t}",
			volume: &secretKey{chartSecret, "token"}, secrets: []string{releaseNamespace}, scrape: &secretKey{chartSecret, "token"}},
		{name: "copied for the Sensors' namespaces", values: "httpAuth: {token: s3cr3t, sensorNamespaces: [argo-events, configmap-attacher]}",
			volume: &secretKey{chartSecret, "token"}, secrets: []string{releaseNamespace, "argo-events"}, scrape: &secretKey{chartSecret, "token"}},
		{name: "neither: rendering fails naming the values", values: "",
			errs: []string{"requires a bearer token", "httpAuth.existingSecret", "httpAuth.token", "httpAuth.enabled=false", "insecure"}},
		{name: "both: rendering fails", values: "httpAuth: {existingSecret: my-token, token: s3cr3t}",
			errs: []string{"one of httpAuth.existingSecret and httpAuth.token"}},
		{name: "the explicit insecure opt-out", values: "httpAuth: {enabled: false}"},
		{name: "public metrics are scraped without the token", values: "httpAuth: {existingSecret: my-token}\nflags: {http-public-metrics: true}",
			volume: &secretKey{"my-token", "token"}},
		{name: "public metrics without a token: rendering fails", values: "httpAuth: {enabled: false}\nflags: {http-public-metrics: true}",
			errs: []string{"flags.http-public-metrics needs httpAuth.enabled"}},
		{name: "a token with white space: rendering fails", values: `httpAuth: {token: "Bearer s3cr3t"}`,
			errs: []string{"httpAuth.token must not contain white space"}},
		{name: "sensorNamespaces cannot copy an existing Secret", values: "httpAuth: {existingSecret: my-token, sensorNamespaces: [argo-events]}",
			errs: []string{"httpAuth.sensorNamespaces needs httpAuth.token"}},
		{name: "flags.http-token-file is the chart's", values: "httpAuth: {existingSecret: my-token}\nflags: {http-token-file: /x}",
			errs: []string{"flags.http-token-file is set by the chart"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			values := tc.values + "\n" + monitored
			if tc.errs != nil {
				err := renderError(t, values)
				if err == nil {
					t.Fatal("the chart rendered; want an error")
				}
				for _, want := range tc.errs {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				return
			}
			objs := renderObjects(t, values)
			if got := tokenVolume(t, objs); !equalKey(got, tc.volume) {
				t.Errorf("token file from %v, want %v", got, tc.volume)
			}
			if got := scrapeToken(t, objs); !equalKey(got, tc.scrape) {
				t.Errorf("ServiceMonitor sends %v, want %v", got, tc.scrape)
			}
			var namespaces []string
			for _, s := range ofKind(objs, "Secret") {
				namespaces = append(namespaces, s.GetNamespace())
				if s.GetName() != chartSecret {
					t.Errorf("the chart creates Secret %s, want %s", s.GetName(), chartSecret)
				}
				data, _, _ := unstructured.NestedStringMap(s.Object, "data")
				tok, _ := base64.StdEncoding.DecodeString(data["token"])
				auth, _ := base64.StdEncoding.DecodeString(data["authorization"])
				if string(tok) != "s3cr3t" || string(auth) != "Bearer s3cr3t" {
					t.Errorf("Secret %s/%s holds token %q and authorization %q", s.GetNamespace(), s.GetName(), tok, auth)
				}
			}
			if !slices.Equal(namespaces, tc.secrets) {
				t.Errorf("token Secrets in %v, want %v", namespaces, tc.secrets)
			}
			// The binary accepts the combination (serve's own validation).
			o := parseServeArgs(t, containerArgs(t, objs))
			if err := o.Validate(); err != nil {
				t.Errorf("serve rejects the rendered arguments: %v", err)
			}
		})
	}
}

func equalKey(a, b *secretKey) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// TestShippedHTTPSensorSendsTheChartsToken: the HTTP Sensor's triggers send the
// Authorization header from the Secret the chart creates for the Sensors' namespace (same
// name, key "authorization" holding "Bearer <token>"), and the pinned Argo Events
// controller mounts that Secret into the Sensor's pod exactly where its sensor-service
// reads secureHeaders from.
func TestShippedHTTPSensorSendsTheChartsToken(t *testing.T) {
	s := loadSensor(t, httpSensorFile)
	objs := renderObjects(t, "httpAuth: {token: s3cr3t, sensorNamespaces: ["+s.Namespace+"]}")
	var secret *unstructured.Unstructured
	for _, o := range ofKind(objs, "Secret") {
		if o.GetNamespace() == s.Namespace {
			secret = o
		}
	}
	if secret == nil {
		t.Fatalf("the chart creates no token Secret in the Sensor's namespace %s", s.Namespace)
	}
	if v := tokenVolume(t, objs); v == nil || v.name != secret.GetName() {
		t.Fatalf("the service reads its token from %v, the Sensor's Secret is %s: not the same Secret", v, secret.GetName())
	}
	data, _, _ := unstructured.NestedStringMap(secret.Object, "data")
	_, pod := sensorPod(t, s)
	for _, trig := range s.Spec.Triggers {
		h := trig.Template.HTTP
		if h == nil {
			t.Fatalf("trigger %s is not an HTTP trigger", trig.Template.Name)
		}
		var ref *v1alpha1.SecureHeader
		for _, sh := range h.SecureHeaders {
			if sh.Name == "Authorization" {
				ref = sh
			}
		}
		if ref == nil || ref.ValueFrom == nil || ref.ValueFrom.SecretKeyRef == nil {
			t.Fatalf("trigger %s sends no Authorization header from a Secret", trig.Template.Name)
		}
		sel := ref.ValueFrom.SecretKeyRef
		if sel.Name != secret.GetName() {
			t.Errorf("trigger %s reads Secret %s, the chart creates %s", trig.Template.Name, sel.Name, secret.GetName())
		}
		v, _ := base64.StdEncoding.DecodeString(data[sel.Key])
		if string(v) != "Bearer s3cr3t" {
			t.Errorf("trigger %s sends key %s = %q, want \"Bearer <token>\"", trig.Template.Name, sel.Key, v)
		}
		want, err := sharedutil.GetSecretVolumePath(sel)
		if err != nil {
			t.Fatal(err)
		}
		if got := mountedSecretFile(pod, sel.Name, sel.Key); got != want {
			t.Errorf("the Sensor's pod has key %s of Secret %s at %q; sensor-service reads %q", sel.Key, sel.Name, got, want)
		}
	}
}
