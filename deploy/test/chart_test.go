package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
)

// requiredValues are the values the chart cannot default: the HTTP receiver's bearer
// token, here from the Secret the shipped HTTP Sensor reads too.
const requiredValues = `
httpAuth:
  existingSecret: configmap-attacher-http-token
`

// valueSets are the chart options the proofs render: the defaults (plus requiredValues),
// every option on, TLS from a Secret, the namespaced variant with the insecure opt-outs.
var valueSets = []struct{ name, values string }{
	{"defaults", requiredValues},
	{"all-options", `
replicaCount: 3
flags:
  allow-secrets: true
  block-owner-deletion: true
  cluster-name: prod-eu
  log-level: debug
  eventbus-url: nats://eventbus-default-js-svc.argo-events.svc:4222
httpAuth:
  token: s3cr3t-t0ken
  sensorNamespaces: [argo-events]
networkPolicy:
  extraFrom:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ci}}
  metricsFrom:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}
      podSelector: {matchLabels: {app.kubernetes.io/name: prometheus}}
  egress:
    enabled: true
    apiServer:
      cidrs: [10.0.0.10/32]
tls:
  enabled: true
  certManager:
    enabled: true
    issuerRef: {kind: ClusterIssuer, name: internal-ca}
serviceMonitor:
  enabled: true
  labels: {release: prometheus}
argocdClusters:
  enabled: true
podAnnotations: {example.com/team: platform}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels: {app.kubernetes.io/name: configmap-attacher}
`},
	{"tls-existing-secret", `
httpAuth:
  existingSecret: my-http-token
  existingSecretKey: bearer
tls:
  enabled: true
  existingSecret: my-serving-cert
leaderElection:
  enabled: true
`},
	{"namespaced", `
rbac:
  scope: namespace
flags:
  allow-secrets: true
httpAuth:
  enabled: false
networkPolicy:
  enabled: false
`},
}

// chartSetFlags are the serve flags the chart sets itself (not under .Values.flags).
var chartSetFlags = map[string]string{
	"grpc-addr": "ports.grpc", "http-addr": "ports.http", "metrics-addr": "ports.metrics", "tls-cert-file": "tls", "tls-key-file": "tls",
	"http-token-file": "httpAuth", "eventbus-auth-file": "eventBusAuth", "argocd-clusters": "argocdClusters",
	"leader-elect": "leaderElection", "leader-elect-namespace": "leaderElection",
	"fleet": "fleet.enabled", "fleet-namespace": "fleet", "fleet-shards": "fleet.shards", "fleet-addr": "fleet.port",
	"fleet-advertise": "fleet.port", "fleet-identity": "fleet",
}

// chartDefaults are the flags whose chart default differs from the binary's, on purpose.
// kube-api-qps and kube-api-burst: the binary's 0 means 50 and 100, which the chart spells out.
// gc-interval: the chart runs the sweep (the binary's 0 is off).
var chartDefaults = map[string]string{"in-cluster": "true", "log-format": "json", "kube-api-qps": "50", "kube-api-burst": "100",
	"gc-interval": "10m"}

func serveFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	o := cli.DefaultServeOptions()
	o.AddFlags(fs)
	return fs
}

func chartValues(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir(t), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestChartExposesEveryServeFlag: each `serve` flag is a chart value (or set by the chart
// from its ports and tls values), and every value under flags is a real serve flag whose
// default is the binary's (or a documented chart default).
func TestChartExposesEveryServeFlag(t *testing.T) {
	values, _ := chartValues(t)["flags"].(map[string]any)
	fs := serveFlags()
	fs.VisitAll(func(f *pflag.Flag) {
		t.Run(f.Name, func(t *testing.T) {
			if where, ok := chartSetFlags[f.Name]; ok {
				if _, dup := values[f.Name]; dup {
					t.Errorf("flags.%s is set by the chart from %s; remove it from values.yaml", f.Name, where)
				}
				return
			}
			v, ok := values[f.Name]
			if !ok {
				t.Fatalf("serve flag --%s has no value under flags: in deploy/helm/configmap-attacher/values.yaml", f.Name)
			}
			want := f.DefValue
			if d, ok := chartDefaults[f.Name]; ok {
				want = d
			}
			if got := flagString(v); got != want && !(got == "" && want == "false") {
				t.Errorf("flags.%s defaults to %q, the binary to %q", f.Name, got, f.DefValue)
			}
		})
	})
	for k := range values {
		if fs.Lookup(k) == nil {
			t.Errorf("flags.%s in values.yaml is not a serve flag", k)
		}
	}
}

func flagString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []any:
		if len(x) == 0 {
			return "[]"
		}
	case float64:
		if x == float64(int64(x)) {
			return yamlScalar(int64(x))
		}
	}
	return yamlScalar(v)
}

func yamlScalar(v any) string {
	b, _ := yaml.Marshal(v)
	return strings.TrimSpace(string(b))
}

// TestChartArgsParseAsServeFlags: the rendered container arguments are exactly a valid
// `serve` command line for every option set.
func TestChartArgsParseAsServeFlags(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			objs, err := decodeObjects(joinManifests(renderChart(t, templateMode, vs.values)))
			if err != nil {
				t.Fatal(err)
			}
			dep := find(objs, "Deployment", "configmap-attacher")
			if dep == nil {
				t.Fatal("no Deployment rendered")
			}
			cs, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
			args, _, _ := unstructured.NestedStringSlice(cs[0].(map[string]any), "args")
			if len(args) == 0 || args[0] != "serve" {
				t.Fatalf("args %q do not start with serve", args)
			}
			fs := serveFlags()
			if err := fs.Parse(args[1:]); err != nil {
				t.Fatalf("args %q: %v", args, err)
			}
			if fs.NArg() != 0 {
				t.Errorf("stray arguments %q", fs.Args())
			}
		})
	}
}

// TestChartRendersIdentically: rendering is a pure function of the values (helm template
// twice gives the same bytes), and no template uses what would make template and install
// differ: lookup, hooks, random or time functions, generated certificates, Capabilities.
func TestChartRendersIdentically(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			a := joinManifests(renderChart(t, templateMode, vs.values))
			b := joinManifests(renderChart(t, templateMode, vs.values))
			if a != b {
				t.Fatalf("two renders differ:\n%s\n---- vs ----\n%s", a, b)
			}
		})
	}
	forbidden := regexp.MustCompile(`\blookup\b|helm\.sh/hook|\brand[A-Za-z]*\b|\buuidv4\b|\bnow\b|\bgenCA\b|\bgenSelfSignedCert|\bgenSignedCert|\bgenPrivateKey|\.Capabilities|randBytes|\bdate\b`)
	files, err := filepath.Glob(filepath.Join(chartDir(t), "templates", "*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := forbidden.FindString(line); m != "" {
				t.Errorf("%s:%d uses %q: the chart must render the same under helm template and install", filepath.Base(f), i+1, m)
			}
		}
	}
}

// TestChartPodIsLockedDown: non-root, read-only root filesystem, no privilege escalation,
// no capabilities, probes on /healthz and /readyz of the ops listener, resources set, for every option set.
func TestChartPodIsLockedDown(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) {
			objs, err := decodeObjects(joinManifests(renderChart(t, templateMode, vs.values)))
			if err != nil {
				t.Fatal(err)
			}
			dep := find(objs, "Deployment", "configmap-attacher")
			spec, _, _ := unstructured.NestedMap(dep.Object, "spec", "template", "spec")
			c := spec["containers"].([]any)[0].(map[string]any)
			checks := []struct {
				what string
				got  any
				want any
			}{
				{"pod runAsNonRoot", nested(spec, "securityContext", "runAsNonRoot"), true},
				{"pod runAsUser", nested(spec, "securityContext", "runAsUser"), int64(65532)},
				{"readOnlyRootFilesystem", nested(c, "securityContext", "readOnlyRootFilesystem"), true},
				{"allowPrivilegeEscalation", nested(c, "securityContext", "allowPrivilegeEscalation"), false},
				{"capabilities", nested(c, "securityContext", "capabilities", "drop"), []any{"ALL"}},
				{"liveness path", nested(c, "livenessProbe", "httpGet", "path"), "/healthz"},
				{"readiness path", nested(c, "readinessProbe", "httpGet", "path"), "/readyz"},
				{"liveness on the ops listener", nested(c, "livenessProbe", "httpGet", "port"), "metrics"},
				{"readiness on the ops listener", nested(c, "readinessProbe", "httpGet", "port"), "metrics"},
				{"startup on the ops listener", nested(c, "startupProbe", "httpGet", "port"), "metrics"},
				{"memory limit", nested(c, "resources", "limits", "memory"), "384Mi"},
			}
			for _, ck := range checks {
				if yamlScalar(ck.got) != yamlScalar(ck.want) {
					t.Errorf("%s = %v, want %v", ck.what, ck.got, ck.want)
				}
			}
		})
	}
}

func nested(m map[string]any, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(m, path...)
	return v
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// TestDockerfile checks the image's key properties by inspection (no registry is
// reachable to build it here): multi-stage, CGO off, version stamped, minimal non-root base.
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	for _, tc := range []struct{ what, pattern string }{
		{"a build stage", `(?m)^FROM .*golang:\$\{GO_VERSION\}.* AS build$`},
		{"the Go version of go.mod", `(?m)^ARG GO_VERSION=1\.26\.8$`},
		{"CGO off", `CGO_ENABLED=0`},
		{"version stamped", `-X github\.com/configmap-attacher/configmap-attacher/internal/cli\.Version=\$\{VERSION\}`},
		{"distroless static final stage", `(?m)^FROM gcr\.io/distroless/static[^ ]*:nonroot$`},
		{"non-root user", `(?m)^USER 65532:65532$`},
		{"the binary as entrypoint", `(?m)^ENTRYPOINT \["/configmap-attacher"\]$`},
	} {
		t.Run(tc.what, func(t *testing.T) {
			if !regexp.MustCompile(tc.pattern).MatchString(df) {
				t.Errorf("Dockerfile lacks %s (%s)", tc.what, tc.pattern)
			}
		})
	}
	if n := len(regexp.MustCompile(`(?m)^FROM `).FindAllString(df, -1)); n != 2 {
		t.Errorf("Dockerfile has %d stages, want 2", n)
	}
}
