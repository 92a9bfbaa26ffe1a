package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argoevents"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

func TestPercentiles(t *testing.T) {
	v := make([]float64, 0, 100)
	for i := 100; i >= 1; i-- {
		v = append(v, float64(i))
	}
	l := percentiles(v)
	if l.N != 100 || l.P50 != 50 || l.P95 != 95 || l.P99 != 99 || l.Max != 100 {
		t.Fatalf("percentiles = %+v", l)
	}
	if (percentiles(nil) != Latency{}) {
		t.Fatal("percentiles of nothing should be zero")
	}
}

func TestCostOf(t *testing.T) {
	d := requests{"PATCH configmaps": 10, "GET replicasets": 5, "POST events": 10, "LIST configmaps": 1, "PUT replicasets/status": 7}
	c := costOf(d, 10)
	if c.WritesPerEvent != 1 || c.GetsPerEvent != 0.5 || c.RecordsPerEvent != 1 || c.ListsPerEvent != 0.1 {
		t.Fatalf("costOf = %+v", c)
	}
}

func TestTriggeredConfigMapReadsTheFixturesEnvFromConfigMap(t *testing.T) {
	body, err := json.Marshal(replicaSet("ns", "rs-7", "cm-7"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, payload, want string
	}{
		{"the shipped Sensor's payload names the fixture's ConfigMap", `{"type":"ADD","body":` + string(body) + `,"metadata":{"cluster":"in-cluster"}}`, "cm-7"},
		{"a payload without a body is refused", `{"type":"ADD"}`, ""},
		{"a ReplicaSet without containers is refused", `{"body":{"metadata":{"name":"rs-1"}}}`, ""},
		{"a container without an envFrom ConfigMap is refused", `{"body":{"spec":{"template":{"spec":{"containers":[{"name":"app"}]}}}}}`, ""},
		{"a payload that is not JSON is refused", `not json`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := triggeredConfigMap([]byte(tc.payload))
			if tc.want == "" {
				if err == nil {
					t.Fatalf("triggeredConfigMap = %q, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("triggeredConfigMap = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestLaneSensorSplitsEachTriggerSoEveryUIDTakesOneLane(t *testing.T) {
	root, err := argoevents.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := argoevents.LoadSensorFile(filepath.Join(root, argoevents.GRPCSensorFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []int{2, 4, 16} {
		t.Run(fmt.Sprintf("%d lanes", k), func(t *testing.T) {
			s, err := laneSensor(shipped, k)
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Spec.Triggers) != k*len(shipped.Spec.Triggers) || len(s.Spec.Dependencies) != len(s.Spec.Triggers) {
				t.Fatalf("%d triggers, %d dependencies", len(s.Spec.Triggers), len(s.Spec.Dependencies))
			}
			for _, uid := range []string{"5e0c5d1a-2b3c-4d5e-8f90-a1b2c3d4e5f0", "x-7", "x-a", "x-F", "x-z"} {
				for _, orig := range shipped.Spec.Triggers {
					matched := 0
					for i, tr := range s.Spec.Triggers {
						d := s.Spec.Dependencies[i]
						if !strings.HasPrefix(tr.Template.Name, orig.Template.Name+"-lane") {
							continue
						}
						if tr.Template.Conditions != d.Name || d.EventName != dependencyOf(shipped, orig).EventName {
							t.Fatalf("trigger %s fires on %s (%s)", tr.Template.Name, tr.Template.Conditions, d.EventName)
						}
						for _, p := range tr.Template.CustomTrigger.Payload {
							if p.Src.DependencyName != d.Name {
								t.Fatalf("trigger %s maps dependency %s", tr.Template.Name, p.Src.DependencyName)
							}
						}
						f := d.Filters.Data[len(d.Filters.Data)-1]
						if regexp.MustCompile(f.Value[0]).MatchString(uid) {
							matched++
						}
					}
					if matched != 1 {
						t.Errorf("UID %s passes %d lanes of %s, want 1", uid, matched, orig.Template.Name)
					}
				}
			}
		})
	}
	if s, err := laneSensor(shipped, 1); err != nil || s != shipped {
		t.Errorf("1 lane: %v, want the Sensor unchanged", err)
	}
	if _, err := laneSensor(shipped, 3); err == nil {
		t.Error("3 lanes: want an error (3 does not divide 16)")
	}
}

func dependencyOf(s *v1alpha1.Sensor, t v1alpha1.Trigger) v1alpha1.EventDependency {
	for _, d := range s.Spec.Dependencies {
		if d.Name == t.Template.Conditions {
			return d
		}
	}
	return v1alpha1.EventDependency{}
}

func TestHTTPSendersReadsASenderCountOnlyForHTTP(t *testing.T) {
	for _, tc := range []struct {
		name, path, kind string
		senders          int
		fails            bool
	}{
		{"a plain path keeps the default", "http", "http", 64, false},
		{"another path keeps the default", "argo-grpc", "argo-grpc", 64, false},
		{"http:N sends N at once", "http:16", "http", 16, false},
		{"a count on another path is refused", "watcher:16", "", 0, true},
		{"a count that is not a number is refused", "http:many", "", 0, true},
		{"a count below one is refused", "http:0", "", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, senders, err := httpSenders(tc.path, 64)
			if (err != nil) != tc.fails || kind != tc.kind || senders != tc.senders {
				t.Fatalf("httpSenders(%q) = %q, %d, %v", tc.path, kind, senders, err)
			}
		})
	}
}

// A service whose own gRPC or HTTP port was taken between its pick and serve's bind is
// started again on other ports, at most startAttempts times; a port of the caller's
// taken (the fleet's) or any other failure ends the start at once.
func TestAServiceWhosePortWasTakenStartsAgainOnOtherPortsAtMostThreeTimes(t *testing.T) {
	for _, tt := range []struct {
		name, fails string // the address the fake serve finds taken ("" for another failure)
		extra       []string
		starts      int
		inUse       bool
	}{
		{"its gRPC port", `$grpc`, nil, startAttempts, true},
		{"its HTTP port", `$http`, nil, startAttempts, true},
		{"the caller's fleet port", `$fleet`, []string{"--fleet-addr", "127.0.0.1:1"}, 1, true},
		{"another failure", "", nil, 1, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			starts := filepath.Join(dir, "starts")
			msg := `echo "error: no kubeconfig" >&2`
			if tt.fails != "" {
				msg = `echo "error: listen tcp ` + tt.fails + `: bind: address already in use" >&2`
			}
			fake := filepath.Join(dir, "serve")
			script := "#!/bin/sh\necho \"$*\" >> " + starts + "\n" +
				`while [ $# -gt 0 ]; do case "$1" in --grpc-addr) grpc=$2;; --http-addr) http=$2;; --fleet-addr) fleet=$2;; esac; shift; done` +
				"\n" + msg + "\nexit 1\n"
			if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			e := &env{cfg: Config{Binary: fake, Logf: t.Logf}, cp: &controlplane.ControlPlane{}, logDir: dir}
			_, err := e.startService(context.Background(), "svc", tt.extra...)
			if err == nil || errors.Is(err, errAddrInUse) != tt.inUse {
				t.Fatalf("err = %v, want one wrapping errAddrInUse: %v", err, tt.inUse)
			}
			b, _ := os.ReadFile(starts)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) != tt.starts {
				t.Fatalf("serve started %d times, want %d:\n%s", len(lines), tt.starts, b)
			}
			if len(lines) > 1 && lines[0] == lines[1] {
				t.Fatalf("started again on the same ports: %s", lines[0])
			}
		})
	}
}
