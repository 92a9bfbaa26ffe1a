package deploytest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// badValues are values the chart's values.schema.json must refuse, each with the name the
// error must mention so that the user finds the typo.
var badValues = []struct{ name, values, mention string }{
	{"a flag typo", "flags:\n  watchh: true\n", "watchh"},
	{"a flag of a newer binary (extraArgs is for those)", "flags:\n  frobnicate: 3\n", "frobnicate"},
	{"a number flag given words", "flags:\n  max-in-flight: lots\n", "max-in-flight"},
	{"a zero in-flight bound", "flags:\n  max-in-flight: 0\n", "max-in-flight"},
	{"a duration without a unit", "flags:\n  execute-timeout: 30\n", "execute-timeout"},
	{"a duration in words", "flags:\n  gc-interval: ten minutes\n", "gc-interval"},
	{"an unknown dry-run mode", "flags:\n  gc-dry-run: maybe\n", "gc-dry-run"},
	{"an unknown log level", "flags:\n  log-level: verbose\n", "log-level"},
	{"a repeated flag given one string", "flags:\n  cluster: prod\n", "cluster"},
	{"a boolean flag given a word", "flags:\n  watch: yes please\n", "watch"},
	{"an EventBus URL without nats://", "flags:\n  eventbus-url: eventbus-default-js-svc:4222\n", "eventbus-url"},
	{"a top-level typo", "replicas: 3\n", "replicas"},
	{"a nested typo", "image:\n  tagg: 1.2.3\n", "tagg"},
	{"a digest that is not one", "image:\n  digest: latest\n", "digest"},
	{"an httpAuth typo", "httpAuth:\n  existingSecrett: x\n", "existingSecrett"},
	{"a NetworkPolicy typo (case)", "networkPolicy:\n  egress:\n    apiserver:\n      cidrs: [10.0.0.1/32]\n", "apiserver"},
	{"leader election neither auto nor a boolean", "leaderElection:\n  enabled: \"yes\"\n", "enabled"},
	{"an unknown RBAC scope", "rbac:\n  scope: clusterwide\n", "scope"},
	{"a ServiceMonitor typo", "serviceMonitor:\n  intervall: 30s\n", "intervall"},
	{"a PrometheusRule typo", "prometheusRule:\n  enable: true\n", "enable"},
	{"a dashboard typo", "grafanaDashboard:\n  label: {grafana_dashboard: \"1\"}\n", "label"},
	{"a startup probe that never passes", "startupProbe:\n  failureThreshold: 0\n", "failureThreshold"},
	{"topology spread given a map", "topologySpreadConstraints: {}\n", "topologySpreadConstraints"},
	{"a port out of range", "ports:\n  http: 80800\n", "http"},
	{"extraArgs that are not flags", "extraArgs: [watch]\n", "extraArgs"},
	{"a replica count in words", "replicaCount: two\n", "replicaCount"},
	{"priorityClassName given a number", "priorityClassName: 1000\n", "priorityClassName"},
}

// documentedValues are the values files the docs tell users to pass (besides the
// deploy/examples, the valueSets and the Argo CD Applications, which are added below).
var documentedValues = []string{
	"deploy/helm/configmap-attacher/values-large-cluster.yaml",
	"deploy/multicluster/hub/values.yaml",
}

// TestChartSchemaRefusesBadValues runs the pinned helm binary as a user (and Argo CD, which
// renders with `helm template`) would: `helm lint --strict` and `helm template` refuse each
// bad value, naming it, and render nothing.
func TestChartSchemaRefusesBadValues(t *testing.T) {
	chart := chartDir(t)
	for _, tc := range badValues {
		t.Run(tc.name, func(t *testing.T) {
			f := tempFile(t, "values.yaml", requiredValues+tc.values)
			for _, cmd := range [][]string{{"lint", "--strict", chart, "-f", f}, {"template", "r", chart, "-f", f}} {
				out, err := runTool(t, "helm", cmd...)
				if err == nil {
					t.Fatalf("helm %s accepted %q:\n%s", cmd[0], tc.values, out)
				}
				if !strings.Contains(out, tc.mention) || !strings.Contains(out, "schema") {
					t.Errorf("helm %s's error does not name %q as a schema error:\n%s", cmd[0], tc.mention, out)
				}
			}
		})
	}
}

// TestChartSchemaAcceptsEveryDocumentedExample: every values file the docs show, every
// deploy/examples folder, the proofs' value sets and the Argo CD Applications' values pass
// `helm lint --strict` and `helm template` with the pinned helm.
func TestChartSchemaAcceptsEveryDocumentedExample(t *testing.T) {
	chart := chartDir(t)
	type example struct{ name, values string }
	var all []example
	for _, p := range documentedValues {
		b, err := os.ReadFile(filepath.Join(repoRoot(t), p))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, example{p, requiredValues + string(b)})
	}
	for _, ex := range deployExamples {
		all = append(all, example{"deploy/examples/" + ex.name, exampleValues(t, ex.name)})
	}
	for _, vs := range valueSets {
		all = append(all, example{"valueSet " + vs.name, vs.values})
	}
	for _, r := range argoCDChartRenders(t) {
		all = append(all, example{r.file + " " + r.app, r.values})
	}
	for _, ex := range all {
		t.Run(ex.name, func(t *testing.T) {
			f := tempFile(t, "values.yaml", ex.values)
			for _, cmd := range [][]string{{"lint", "--strict", chart, "-f", f}, {"template", "r", chart, "-f", f}} {
				if out, err := runTool(t, "helm", cmd...); err != nil {
					t.Errorf("helm %s refused it: %v\n%s", cmd[0], err, out)
				}
			}
		})
	}
}

// TestChartSchemaTypesEveryServeFlag: each value under flags has a schema entry of the
// flag's type, and flags refuses every other key. A new serve flag needs its entry here
// (TestChartExposesEveryServeFlag already needs its value in values.yaml).
func TestChartSchemaTypesEveryServeFlag(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(chartDir(t), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	var flags struct {
		AdditionalProperties *bool                     `json:"additionalProperties"`
		Properties           map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal(schema.Properties["flags"], &flags); err != nil {
		t.Fatal(err)
	}
	if flags.AdditionalProperties == nil || *flags.AdditionalProperties {
		t.Error("values.schema.json: flags must set additionalProperties: false (a typo must fail)")
	}
	values, _ := chartValues(t)["flags"].(map[string]any)
	fs := serveFlags()
	for name := range values {
		f := fs.Lookup(name)
		if f == nil {
			continue // TestChartExposesEveryServeFlag reports it
		}
		entry, ok := flags.Properties[name]
		if !ok {
			t.Errorf("values.schema.json has no flags.%s (a %s flag)", name, f.Value.Type())
			continue
		}
		if want, got := schemaTypeOf(f), schemaType(entry); !strings.Contains(got, want) {
			t.Errorf("values.schema.json: flags.%s is %s, the flag is a %s (want %s)", name, got, f.Value.Type(), want)
		}
	}
	for name := range flags.Properties {
		// The chart's own flags are accepted by the schema so that rendering fails with
		// the chart's message naming the value to use instead (TestChartHTTPAuth, TestChartEventBusAuth).
		if _, chartSet := chartSetFlags[name]; chartSet {
			continue
		}
		if _, ok := values[name]; !ok {
			t.Errorf("values.schema.json has flags.%s, values.yaml does not", name)
		}
	}
}

// schemaTypeOf is the schema type a flag's value takes under flags.
func schemaTypeOf(f *pflag.Flag) string {
	switch f.Value.Type() {
	case "bool":
		return "boolean"
	case "int", "int64", "int32", "uint", "uint32", "uint64":
		return "integer"
	case "float32", "float64":
		return "number"
	case "duration":
		return "duration"
	case "stringArray", "stringSlice":
		return "array"
	}
	return "string"
}

// schemaType summarises a schema entry: its types, "duration" for the duration definition,
// "string" for an enum of strings.
func schemaType(entry map[string]any) string {
	b, _ := json.Marshal(entry)
	s := string(b)
	switch {
	case strings.Contains(s, "#/$defs/duration"):
		return "duration"
	case entry["enum"] != nil:
		return "string enum"
	}
	t, _ := json.Marshal(entry["type"])
	return string(t)
}
