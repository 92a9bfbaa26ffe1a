package controlplane

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkloadBinaries are the extra binaries Options.Workloads starts, built by `make tools`
// (rollouts-controller is the default release's: Options.Rollouts picks another).
var WorkloadBinaries = []string{"kube-scheduler", "kwok", "rollouts-controller"}

// workloadAPIServerArgs are kube-apiserver's extra flags with Options.Workloads. The
// TaintNodesByCondition admission plugin would admit the fake Node with a not-ready
// taint that only the node-lifecycle controller lifts; that controller is not run: it
// expects kubelet heartbeats kwok does not send often enough, and would mark every Pod
// NotReady each time the Node's status looks stale.
var workloadAPIServerArgs = []string{"--disable-admission-plugins=TaintNodesByCondition"}

// Names of what Options.Workloads creates.
const (
	// RolloutsNamespace is the Argo Rollouts controller's own namespace (its POD_NAMESPACE).
	RolloutsNamespace = "argo-rollouts"
	// FakeNodeName is the Node kwok manages; every Pod is scheduled onto it.
	FakeNodeName = "kwok-node-0"
	// KwokNodeAnnotation marks the Nodes kwok manages (value "fake").
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// RolloutsReadyLog is the controller's log line once its informers have synced.
	RolloutsReadyLog = "Started controller"
)

// startWorkloads starts what running Pods need, in order: kube-scheduler (so templates
// need no nodeName), kwok with one fake Node (Pods on it turn Running and Ready), and
// the Argo Rollouts controller (canary steps, promote, abort, undo, revisionHistoryLimit).
func (cp *ControlPlane) startWorkloads(ctx context.Context) error {
	start := time.Now()
	if err := cp.startScheduler(ctx); err != nil {
		return err
	}
	cp.opts.Logf("controlplane %s: kube-scheduler ready (%s)", cp.opts.Name, time.Since(start).Round(time.Millisecond))
	if err := cp.startKwok(ctx); err != nil {
		return err
	}
	cp.opts.Logf("controlplane %s: kwok ready, Node %s Ready and untainted (%s)", cp.opts.Name, FakeNodeName, time.Since(start).Round(time.Millisecond))
	if err := cp.startRollouts(ctx); err != nil {
		return err
	}
	cp.opts.Logf("controlplane %s: Argo Rollouts %s controller (%s) ready (%s)", cp.opts.Name, cp.rollouts.Version, cp.rollouts.Binary, time.Since(start).Round(time.Millisecond))
	return nil
}

func (cp *ControlPlane) startScheduler(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + cp.kubeconfig,
		"--authentication-kubeconfig=" + cp.kubeconfig,
		"--authorization-kubeconfig=" + cp.kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--v=0",
	}
	if err := cp.run("kube-scheduler", args); err != nil {
		return err
	}
	return cp.waitHealthz(ctx, "kube-scheduler", fmt.Sprintf("https://127.0.0.1:%d/healthz", port))
}

// startKwok creates the fake Node and starts kwok managing it, then waits until kwok
// has marked it Ready.
func (cp *ControlPlane) startKwok(ctx context.Context) error {
	if err := cp.createFakeNode(ctx); err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + cp.kubeconfig,
		"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
		"--node-ip=10.0.0.1",
		"--cidr=10.0.0.1/24",
		// kwok's own server (logs, exec) would bind all interfaces by default.
		"--server-address=127.0.0.1:" + strconv.Itoa(port),
	}
	if err := cp.run("kwok", args); err != nil {
		return err
	}
	kc := cp.Client()
	return cp.poll(ctx, "kwok", func() error {
		n, err := kc.CoreV1().Nodes().Get(ctx, FakeNodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(n.Spec.Taints) > 0 {
			return fmt.Errorf("node %s still tainted %v", FakeNodeName, n.Spec.Taints)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s not Ready yet", FakeNodeName)
	})
}

func (cp *ControlPlane) createFakeNode(ctx context.Context) error {
	room := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("64"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        FakeNodeName,
			Annotations: map[string]string{KwokNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{"kubernetes.io/hostname": FakeNodeName, "kubernetes.io/os": "linux",
				"kubernetes.io/arch": "amd64", "type": "kwok"},
		},
		Status: corev1.NodeStatus{Capacity: room, Allocatable: room},
	}
	if _, err := cp.Client().CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the fake Node: %w", err)
	}
	return nil
}

// startRollouts starts the Argo Rollouts controller in its namespace. Its metrics and
// healthz servers bind every interface (the host is not configurable), so both get
// free ports.
func (cp *ControlPlane) startRollouts(ctx context.Context) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: RolloutsNamespace}}
	if _, err := cp.Client().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", RolloutsNamespace, err)
	}
	metrics, err := FreePort()
	if err != nil {
		return err
	}
	healthz, err := FreePort()
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig=" + cp.kubeconfig,
		"--leader-elect=false",
		"--metricsport=" + strconv.Itoa(metrics),
		"--healthzPort=" + strconv.Itoa(healthz),
		"--loglevel=info",
	}
	// The process is "rollouts-controller" (its log, LogTail) whichever release runs.
	if err := cp.runAs("rollouts-controller", cp.rollouts.Binary, args, "POD_NAMESPACE="+RolloutsNamespace); err != nil {
		return err
	}
	return cp.poll(ctx, "rollouts-controller", func() error {
		return cp.logContains("rollouts-controller", RolloutsReadyLog)
	})
}

// waitHealthz polls a component's HTTPS /healthz (self-signed: not verified) until 200.
func (cp *ControlPlane) waitHealthz(ctx context.Context, name, url string) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // local self-signed health endpoint
	return cp.poll(ctx, name, func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/healthz: %d", resp.StatusCode)
		}
		return nil
	})
}

// logContains reports whether the named process's log holds substr.
func (cp *ControlPlane) logContains(name, substr string) error {
	data, err := os.ReadFile(filepath.Join(cp.dir, name+".log"))
	if err != nil {
		return err
	}
	if !strings.Contains(string(data), substr) {
		return fmt.Errorf("%s log has no %q yet", name, substr)
	}
	return nil
}

// LogTail returns the last n lines of the named process's log (for example
// "rollouts-controller", "kwok", "kube-scheduler"), or "" if it has none.
func (cp *ControlPlane) LogTail(name string, n int) string {
	data, err := os.ReadFile(filepath.Join(cp.dir, name+".log"))
	if err != nil {
		return ""
	}
	return lastLines(string(data), n)
}
