package deploytest

import (
	"net"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// endpoint is one side of a connection, as NetworkPolicy sees it: a pod (namespace and
// labels) or an address.
type endpoint struct {
	name   string
	ns     string
	labels map[string]string
	ip     string
}

// conn is a connection to or from the service's pods on a port.
type conn struct {
	peer     endpoint
	port     int32
	protocol corev1.Protocol
}

// policyAllows evaluates NetworkPolicy semantics for the service's pods in the policy's
// namespace: is c allowed in (ingress) or out (egress)? Without a policy of that
// direction everything is allowed. namedPorts maps the pods' port names to numbers.
func policyAllows(np *networkingv1.NetworkPolicy, egress bool, c conn, namedPorts map[string]int32) bool {
	dir := networkingv1.PolicyTypeIngress
	if egress {
		dir = networkingv1.PolicyTypeEgress
	}
	restricted := false
	for _, p := range np.Spec.PolicyTypes {
		restricted = restricted || p == dir
	}
	if !restricted {
		return true
	}
	type rule struct {
		peers []networkingv1.NetworkPolicyPeer
		ports []networkingv1.NetworkPolicyPort
	}
	var rules []rule
	if egress {
		for _, r := range np.Spec.Egress {
			rules = append(rules, rule{r.To, r.Ports})
		}
	} else {
		for _, r := range np.Spec.Ingress {
			rules = append(rules, rule{r.From, r.Ports})
		}
	}
	for _, r := range rules {
		if portAllowed(r.ports, c, namedPorts) && peerAllowed(r.peers, np.Namespace, c.peer) {
			return true
		}
	}
	return false
}

func portAllowed(ports []networkingv1.NetworkPolicyPort, c conn, named map[string]int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if proto != c.protocol {
			continue
		}
		if p.Port == nil {
			return true
		}
		n := p.Port.IntVal
		if p.Port.StrVal != "" {
			n = named[p.Port.StrVal]
		}
		if n == c.port {
			return true
		}
	}
	return false
}

func peerAllowed(peers []networkingv1.NetworkPolicyPeer, policyNS string, e endpoint) bool {
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if p.IPBlock != nil {
			if e.ip != "" && inBlock(p.IPBlock, e.ip) {
				return true
			}
			continue
		}
		if e.ip != "" {
			continue
		}
		nsOK := e.ns == policyNS
		if p.NamespaceSelector != nil {
			nsOK = selects(p.NamespaceSelector, map[string]string{corev1.LabelMetadataName: e.ns})
		}
		podOK := p.PodSelector == nil || selects(p.PodSelector, e.labels)
		if nsOK && podOK {
			return true
		}
	}
	return false
}

func selects(s *metav1.LabelSelector, l map[string]string) bool {
	sel, err := metav1.LabelSelectorAsSelector(s)
	return err == nil && sel.Matches(labels.Set(l))
}

func inBlock(b *networkingv1.IPBlock, ip string) bool {
	_, cidr, err := net.ParseCIDR(b.CIDR)
	addr := net.ParseIP(ip)
	if err != nil || addr == nil || !cidr.Contains(addr) {
		return false
	}
	for _, ex := range b.Except {
		if _, e, err := net.ParseCIDR(ex); err == nil && e.Contains(addr) {
			return false
		}
	}
	return true
}

// renderedPolicy returns the chart's NetworkPolicy (nil when none), checking it selects
// the chart's pods, and the pods' named ports.
func renderedPolicy(t *testing.T, objs []*unstructured.Unstructured) (*networkingv1.NetworkPolicy, map[string]int32) {
	t.Helper()
	pols := ofKind(objs, "NetworkPolicy")
	if len(pols) == 0 {
		return nil, nil
	}
	if len(pols) > 1 {
		t.Fatalf("%d NetworkPolicies rendered, want 1", len(pols))
	}
	np := &networkingv1.NetworkPolicy{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(pols[0].Object, np); err != nil {
		t.Fatal(err)
	}
	dep := find(objs, "Deployment", releaseName)
	tmpl := corev1.PodTemplateSpec{}
	raw, _, _ := unstructured.NestedMap(dep.Object, "spec", "template")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &tmpl); err != nil {
		t.Fatal(err)
	}
	if np.Namespace != dep.GetNamespace() || !selects(&np.Spec.PodSelector, tmpl.Labels) {
		t.Fatalf("the NetworkPolicy does not select the service's pods (%v)", tmpl.Labels)
	}
	ports := map[string]int32{}
	for _, p := range tmpl.Spec.Containers[0].Ports {
		ports[p.Name] = p.ContainerPort
	}
	return np, ports
}

// sensorEndpoint is the pod the pinned Argo Events controller makes for a shipped
// Sensor, optionally renamed or moved to another namespace.
func sensorEndpoint(t *testing.T, name, file, rename, namespace string) endpoint {
	t.Helper()
	s := loadSensor(t, file)
	if rename != "" {
		s.Name = rename
	}
	if namespace != "" {
		s.Namespace = namespace
	}
	ns, pod := sensorPod(t, s)
	return endpoint{name: name, ns: ns, labels: pod.Labels}
}

// TestChartNetworkPolicy: by default only the pods Argo Events runs for the shipped
// Sensors reach the grpc and http ports (their labels as the pinned Argo Events
// controller sets them): not another Sensor, not a pod of the same name elsewhere, not
// the rest of the cluster. extraFrom and metricsFrom add peers, the policy can be turned
// off, egress is unrestricted unless asked, and then allows exactly the apiserver, DNS and
// the EventBus.
func TestChartNetworkPolicy(t *testing.T) {
	var (
		grpcSensor    = sensorEndpoint(t, "the gRPC Sensor's pod", grpcSensorFile, "", "")
		httpSensor    = sensorEndpoint(t, "the HTTP Sensor's pod", httpSensorFile, "", "")
		otherSensor   = sensorEndpoint(t, "another Sensor's pod", grpcSensorFile, "other", "")
		sensorAway    = sensorEndpoint(t, "the same Sensor in another namespace", grpcSensorFile, "", "team-a")
		anyPod        = endpoint{name: "a pod in the release namespace", ns: releaseNamespace, labels: map[string]string{"app": "x"}}
		ciJob         = endpoint{name: "a CI job", ns: "ci", labels: map[string]string{"job": "post"}}
		prometheus    = endpoint{name: "Prometheus", ns: "monitoring", labels: map[string]string{"app.kubernetes.io/name": "prometheus"}}
		apiServer     = endpoint{name: "the apiserver", ip: "10.0.0.10"}
		otherAddress  = endpoint{name: "another address", ip: "10.0.0.11"}
		dns           = endpoint{name: "cluster DNS", ns: "kube-system", labels: map[string]string{"k8s-app": "kube-dns"}}
		eventBus      = endpoint{name: "the EventBus", ns: "argo-events", labels: map[string]string{"controller": "eventbus-controller", "eventbus-name": "default"}}
		grpc, http    = int32(9000), int32(8080)
		metrics       = int32(8081)
		tcp, udp      = corev1.ProtocolTCP, corev1.ProtocolUDP
		egressEnabled = `
networkPolicy:
  egress:
    enabled: true
    apiServer: {cidrs: [10.0.0.10/32]}
    extraTo:
      - to: [{ipBlock: {cidr: 192.168.0.0/16}}]
        ports: [{port: 6443, protocol: TCP}]
`
	)
	type check struct {
		egress bool
		c      conn
		want   bool
	}
	in := func(e endpoint, port int32, want bool) check { return check{false, conn{e, port, tcp}, want} }
	out := func(e endpoint, port int32, proto corev1.Protocol, want bool) check {
		return check{true, conn{e, port, proto}, want}
	}
	tests := []struct {
		name   string
		values string
		// none: no NetworkPolicy is rendered.
		none   bool
		errs   []string
		checks []check
	}{
		{name: "by default only the shipped Sensors reach the ports", values: "", checks: []check{
			in(grpcSensor, grpc, true), in(grpcSensor, http, true), in(httpSensor, http, true), in(httpSensor, grpc, true),
			in(otherSensor, grpc, false), in(otherSensor, http, false), in(sensorAway, grpc, false),
			in(anyPod, grpc, false), in(anyPod, http, false), in(prometheus, http, false), in(prometheus, metrics, false),
			in(grpcSensor, metrics, false), in(httpSensor, metrics, false),
			// Egress is not restricted by default.
			out(otherAddress, 443, tcp, true), out(anyPod, 80, tcp, true),
		}},
		{name: "extraFrom adds peers to both ports", values: `
networkPolicy:
  extraFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: ci}}}]
`, checks: []check{in(ciJob, grpc, true), in(ciJob, http, true), in(grpcSensor, grpc, true), in(anyPod, http, false)}},
		{name: "metricsFrom adds peers to the metrics port only", values: `
networkPolicy:
  metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
`, checks: []check{in(prometheus, metrics, true), in(prometheus, http, false), in(prometheus, grpc, false), in(grpcSensor, grpc, true),
			in(grpcSensor, metrics, false)}},
		{name: "without Sensors or peers nothing gets in", values: "networkPolicy: {sensors: {enabled: false}}",
			checks: []check{in(grpcSensor, grpc, false), in(httpSensor, http, false), in(anyPod, http, false)}},
		{name: "another Sensor by its name", values: "networkPolicy: {sensors: {names: [other]}}",
			checks: []check{in(otherSensor, grpc, true), in(grpcSensor, grpc, false)}},
		{name: "every Sensor of the namespace", values: "networkPolicy: {sensors: {names: []}}",
			checks: []check{in(otherSensor, grpc, true), in(grpcSensor, http, true), in(sensorAway, grpc, false), in(anyPod, grpc, false)}},
		{name: "Sensors in another namespace", values: "networkPolicy: {sensors: {namespace: team-a}}",
			checks: []check{in(sensorAway, grpc, true), in(grpcSensor, grpc, false)}},
		{name: "turned off", values: "networkPolicy: {enabled: false}", none: true},
		{name: "egress: the apiserver, DNS, nothing else", values: egressEnabled, checks: []check{
			out(apiServer, 443, tcp, true), out(apiServer, 6443, tcp, true), out(apiServer, 80, tcp, false),
			out(otherAddress, 443, tcp, false), out(dns, 53, udp, true), out(dns, 53, tcp, true),
			out(eventBus, 4222, tcp, false), out(anyPod, 53, udp, false), out(endpoint{name: "a member apiserver", ip: "192.168.1.1"}, 6443, tcp, true),
			in(grpcSensor, grpc, true),
		}},
		{name: "egress with the EventBus subscription", values: egressEnabled + "flags: {eventbus-url: nats://eventbus-default-js-svc.argo-events.svc:4222}",
			checks: []check{out(eventBus, 4222, tcp, true), out(eventBus, 8222, tcp, false), out(apiServer, 443, tcp, true)}},
		{name: "egress without the apiserver's addresses fails", values: "networkPolicy: {egress: {enabled: true}}",
			errs: []string{"networkPolicy.egress.apiServer.cidrs"}},
		{name: "a ServiceMonitor the policy would block fails", values: "serviceMonitor: {enabled: true}",
			errs: []string{"networkPolicy.metricsFrom"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			values := requiredValues + tc.values
			if tc.errs != nil {
				err := renderError(t, values)
				if err == nil {
					t.Fatal("the chart rendered; want an error")
				}
				for _, want := range tc.errs {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not name %q", err, want)
					}
				}
				return
			}
			np, ports := renderedPolicy(t, renderObjects(t, values))
			if tc.none {
				if np != nil {
					t.Fatal("a NetworkPolicy is rendered")
				}
				return
			}
			if np == nil {
				t.Fatal("no NetworkPolicy rendered")
			}
			for _, ck := range tc.checks {
				dir := "to the pods from"
				if ck.egress {
					dir = "from the pods to"
				}
				if got := policyAllows(np, ck.egress, ck.c, ports); got != ck.want {
					t.Errorf("%s %s port %d/%s: allowed %v, want %v", dir, ck.c.peer.name, ck.c.port, ck.c.protocol, got, ck.want)
				}
			}
		})
	}
}
