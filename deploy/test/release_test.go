package deploytest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// semver is a release version as make release accepts it (no leading "v").
var semver = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// releaseVersion reads the VERSION file, the one source of truth.
func releaseVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(b))
	if !semver.MatchString(v) {
		t.Fatalf("VERSION %q is not a semantic version (MAJOR.MINOR.PATCH[-PRE])", v)
	}
	return v
}

// TestReleaseVersionIsTheSameEverywhere: the chart's version and appVersion (the image tag
// it deploys by default), the Kustomize manifests' image tags and version labels, and the
// CHANGELOG's newest release are the VERSION file's (the Makefile stamps the binary and names
// the image from it). Bumping VERSION without the rest fails here.
func TestReleaseVersionIsTheSameEverywhere(t *testing.T) {
	v := releaseVersion(t)
	root := repoRoot(t)
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	b, err := os.ReadFile(filepath.Join(chartDir(t), "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Version != v || chart.AppVersion != v {
		t.Errorf("Chart.yaml version %q appVersion %q, VERSION %q: set both to VERSION", chart.Version, chart.AppVersion, v)
	}
	tag := regexp.MustCompile(`configmap-attacher/configmap-attacher:([^"\s]+)|newTag: "?([^"\s]+)"?|app\.kubernetes\.io/version: "?([^"\s]+)"?|helm\.sh/chart: configmap-attacher-([^"\s]+)`)
	files, _ := filepath.Glob(filepath.Join(root, "deploy", "kustomize", "*", "*.yaml"))
	more, _ := filepath.Glob(filepath.Join(root, "deploy", "kustomize", "overlays", "*", "*.yaml"))
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range tag.FindAllStringSubmatch(string(b), -1) {
			if got := m[1] + m[2] + m[3] + m[4]; got != v {
				rel, _ := filepath.Rel(root, f)
				t.Errorf("%s: %q names version %q, VERSION is %q", rel, m[0], got, v)
			}
		}
	}
	cl, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	newest := regexp.MustCompile(`(?m)^## \[([0-9][^\]]*)\]`).FindStringSubmatch(string(cl))
	if newest == nil || newest[1] != v {
		t.Errorf("CHANGELOG.md's newest release is %v, VERSION is %q: add a section for it", newest, v)
	}
}
