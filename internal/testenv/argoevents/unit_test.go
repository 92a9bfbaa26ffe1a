package argoevents_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"
	"github.com/argoproj/argo-events/pkg/sensors/triggers"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/argoevents"
)

// helperEnv switches the test binary into a helper process (see helperMain).
const helperEnv = "ARGOEVENTS_TEST_HELPER"

// helperMain is the test binary acting as a stand-in for an Argo Events process in the
// network-namespace test: it binds :7777 like Argo Events does, dials every address in
// ARGOEVENTS_TEST_DIAL and prints "ADDR ok" or "ADDR refused" per address.
func helperMain(mode string) int {
	switch mode {
	case "sleep":
		time.Sleep(time.Minute)
		return 0
	case "exit":
		return 0
	}
	ln, err := net.Listen("tcp", ":7777")
	if err != nil {
		fmt.Println("bind :7777 failed:", err)
		return 3
	}
	defer ln.Close()
	for _, addr := range strings.Fields(os.Getenv("ARGOEVENTS_TEST_DIAL")) {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			fmt.Println(addr, "refused")
			continue
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 5)
		if _, err := c.Read(buf); err != nil || string(buf) != "hello" {
			fmt.Println(addr, "bad-greeting")
		} else {
			fmt.Println(addr, "ok")
		}
		_ = c.Close()
	}
	time.Sleep(500 * time.Millisecond) // hold :7777 while the sibling runs
	return 0
}

// requireRoot fails the test without root (CI and the dev machines run as root); only a
// -short run on a machine without root skips it.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if testing.Short() {
		t.Skip("network namespaces need root")
	}
	t.Fatal("network namespaces need root (CI and the dev machines run as root)")
}

// TestIsolatedProcesses runs two processes that both bind :7777 (as every Argo Events
// process does) at the same time, each in its own network namespace, and checks that a
// bridged host loopback port is reachable from inside while an unbridged one is not.
func TestIsolatedProcesses(t *testing.T) {
	requireRoot(t)
	greeter := func() (net.Listener, int) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte("hello"))
				_ = c.Close()
			}
		}()
		t.Cleanup(func() { _ = ln.Close() })
		return ln, ln.Addr().(*net.TCPAddr).Port
	}
	_, bridged := greeter()
	_, hidden := greeter()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(
		"apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:%d\"}\n", bridged)), 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dial := fmt.Sprintf("127.0.0.1:%d 127.0.0.1:%d", bridged, hidden)
	var procs []*argoevents.Process
	for i := range 2 {
		es := &v1alpha1.EventSource{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("helper%d", i)}}
		p, err := argoevents.Start(context.Background(), argoevents.Config{
			Binary: self, EventSource: es, EventBusURL: fmt.Sprintf("nats://127.0.0.1:%d", bridged),
			Kubeconfig: kubeconfig, LogFile: filepath.Join(t.TempDir(), "helper.log"),
			Env: []string{helperEnv + "=1", "ARGOEVENTS_TEST_DIAL=" + dial},
		})
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		select {
		case <-p.Done():
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not finish", p.Name())
		}
		if exited, err := p.Exited(); !exited || err.Error() != "exit status 0" {
			t.Errorf("%s: exit %v; log:\n%s", p.Name(), err, p.Logs())
		}
		want := fmt.Sprintf("127.0.0.1:%d ok\n127.0.0.1:%d refused\n", bridged, hidden)
		if got := p.Logs(); got != want {
			t.Errorf("%s output:\n%s\nwant:\n%s", p.Name(), got, want)
		}
		if err := p.Stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	}
}

// TestIsolationSparesOtherChildren guards against a trap of per-thread namespaces: a
// child started with Pdeathsig (as the local control plane starts kube-apiserver) is
// killed when the OS thread that forked it ends, and the Go runtime ends a thread whose
// goroutine exits while locked. Starting isolated processes must never end a thread.
func TestIsolationSparesOtherChildren(t *testing.T) {
	requireRoot(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(name, mode string, shared bool) *argoevents.Process {
		p, err := argoevents.Start(context.Background(), argoevents.Config{
			Binary: self, EventSource: &v1alpha1.EventSource{ObjectMeta: metav1.ObjectMeta{Name: name}},
			EventBusURL: "nats://127.0.0.1:1", Kubeconfig: kubeconfig, Shared: shared,
			LogFile: filepath.Join(t.TempDir(), name+".log"), Env: []string{helperEnv + "=" + mode},
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Sleepers forked from several threads, then many isolated starts.
	var sleepers []*argoevents.Process
	for i := range 4 {
		sleepers = append(sleepers, start(fmt.Sprintf("sleeper%d", i), "sleep", true))
	}
	t.Cleanup(func() {
		for _, p := range sleepers {
			_ = p.Stop()
		}
	})
	for i := range 24 {
		p := start(fmt.Sprintf("short%d", i), "exit", false)
		<-p.Done()
		_ = p.Stop()
	}
	for _, p := range sleepers {
		if exited, err := p.Exited(); exited {
			t.Errorf("%s was killed (%v) by an isolated start", p.Name(), err)
		}
	}
}

// TestShippedObjects loads the shipped EventSource and Sensors strictly and checks the
// contract between them.
func TestShippedObjects(t *testing.T) {
	root, err := argoevents.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	es, err := argoevents.LoadEventSourceFile(filepath.Join(root, argoevents.EventSourceFile))
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range es.Spec.Resource {
		if r.Group != "apps" || r.Version != "v1" || r.Resource != "replicasets" {
			t.Errorf("event %s watches %s/%s %s", name, r.Group, r.Version, r.Resource)
		}
		if len(r.EventTypes) != 1 || r.EventTypes[0] != v1alpha1.ADD {
			t.Errorf("event %s types %v, want [ADD]", name, r.EventTypes)
		}
		if r.Filter == nil || len(r.Filter.Labels) == 0 {
			t.Errorf("event %s has no label filter", name)
		}
		if r.Metadata["cluster"] == "" {
			t.Errorf("event %s has no metadata.cluster", name)
		}
	}
	tests := []struct {
		file string
		kind string // "custom" or "http"
	}{
		{file: argoevents.GRPCSensorFile, kind: "custom"},
		{file: argoevents.HTTPSensorFile, kind: "http"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			s, err := argoevents.LoadSensorFile(filepath.Join(root, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range s.Spec.Dependencies {
				if d.EventSourceName != es.Name {
					t.Errorf("dependency %s names event source %q, want %q", d.Name, d.EventSourceName, es.Name)
				}
				if _, ok := es.Spec.Resource[d.EventName]; !ok {
					t.Errorf("dependency %s names event %q, not in the EventSource", d.Name, d.EventName)
				}
			}
			if len(s.Spec.Triggers) != len(s.Spec.Dependencies) {
				t.Errorf("%d triggers for %d dependencies, want one each", len(s.Spec.Triggers), len(s.Spec.Dependencies))
			}
			for _, trig := range s.Spec.Triggers {
				tmpl := trig.Template
				var payload []v1alpha1.TriggerParameter
				switch tc.kind {
				case "custom":
					if tmpl.CustomTrigger == nil {
						t.Fatalf("trigger %s: no custom trigger", tmpl.Name)
					}
					payload = tmpl.CustomTrigger.Payload
					for k := range tmpl.CustomTrigger.Spec {
						if !knownSpecKeys[k] {
							t.Errorf("trigger %s: spec key %q is not in the contract (docs/design.md)", tmpl.Name, k)
						}
					}
				case "http":
					if tmpl.HTTP == nil {
						t.Fatalf("trigger %s: no HTTP trigger", tmpl.Name)
					}
					payload = tmpl.HTTP.Payload
					if tmpl.HTTP.Headers["Content-Type"] != "application/json" {
						t.Errorf("trigger %s: content type %q", tmpl.Name, tmpl.HTTP.Headers["Content-Type"])
					}
					// The receiver requires a bearer token: sent from a Secret, never inline.
					if _, inline := tmpl.HTTP.Headers["Authorization"]; inline {
						t.Errorf("trigger %s: Authorization is a plain header; it must come from a Secret (secureHeaders)", tmpl.Name)
					}
					sent := false
					for _, h := range tmpl.HTTP.SecureHeaders {
						sent = sent || (h.Name == "Authorization" && h.ValueFrom != nil && h.ValueFrom.SecretKeyRef != nil)
					}
					if !sent {
						t.Errorf("trigger %s: no Authorization secureHeader from a Secret", tmpl.Name)
					}
				}
				// Every parameter must name the trigger's only dependency: sensor-service
				// v1.9.11 panics building a payload from a dependency that did not arrive.
				for _, p := range payload {
					if p.Src == nil || p.Src.DependencyName != tmpl.Conditions {
						t.Errorf("trigger %s (conditions %q): payload parameter %+v names another dependency", tmpl.Name, tmpl.Conditions, p.Src)
					}
				}
				t.Run(tmpl.Name, func(t *testing.T) { checkMapping(t, es, s, tmpl.Conditions, payload) })
			}
		})
	}
}

// knownSpecKeys are the custom trigger spec keys of the contract (docs/design.md).
var knownSpecKeys = map[string]bool{
	"operation": true, "configMaps": true, "secrets": true, "discover": true, "selector": true,
	"includeSecrets": true, "cluster": true, "namespace": true, "dryRun": true,
}

// checkMapping runs the shipped payload mapping through Argo Events' own parameter code
// for an event of the trigger's dependency and checks the result is the resource event data.
func checkMapping(t *testing.T, es *v1alpha1.EventSource, s *v1alpha1.Sensor, depName string, payload []v1alpha1.TriggerParameter) {
	t.Helper()
	rs := &appsv1.ReplicaSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "app-abc", Namespace: "team", UID: "u-1"},
	}
	for _, dep := range s.Spec.Dependencies {
		if dep.Name != depName {
			continue
		}
		t.Run(dep.Name, func(t *testing.T) {
			body, _ := json.Marshal(rs)
			data, _ := json.Marshal(map[string]any{
				"type": "ADD", "body": json.RawMessage(body), "group": "apps", "version": "v1", "resource": "replicasets",
				"metadata": es.Spec.Resource[dep.EventName].Metadata,
			})
			events := map[string]*v1alpha1.Event{dep.Name: {
				Context: &v1alpha1.EventContext{DataContentType: v1alpha1.MediaTypeJSON},
				Data:    data,
			}}
			got, err := triggers.ConstructPayload(events, payload)
			if err != nil {
				t.Fatalf("ConstructPayload: %v", err)
			}
			if err := checkPayload(got, rs); err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(got, []byte(`"body":{`)) {
				t.Errorf("body is not a raw JSON object: %s", got)
			}
		})
	}
}
