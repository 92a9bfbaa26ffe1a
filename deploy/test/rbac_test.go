package deploytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/configmap-attacher/configmap-attacher/internal/gc"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// shippedRBAC renders the chart's RBAC for release namespace ns with the options under
// test on (Secrets allowed, leader election on) and returns the service's rules (the
// ClusterRole, or the Role with rbac.scope=namespace) and the leader-election Role's rules.
func shippedRBAC(t *testing.T, ns string, namespaced bool) (main, lease []rbacv1.PolicyRule) {
	t.Helper()
	values := requiredValues + "flags:\n  allow-secrets: true\nleaderElection:\n  enabled: true\n"
	if namespaced {
		values += "rbac:\n  scope: namespace\n"
	}
	files := renderChartNS(t, ns, values)
	objs, err := decodeObjects(files["configmap-attacher/templates/rbac.yaml"])
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		var rules struct {
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		b, _ := json.Marshal(o.Object)
		if err := json.Unmarshal(b, &rules); err != nil {
			t.Fatal(err)
		}
		switch {
		case o.GetKind() == "ClusterRole" || (o.GetKind() == "Role" && o.GetName() == releaseName):
			main = rules.Rules
		case o.GetKind() == "Role" && strings.HasSuffix(o.GetName(), "-leader-election"):
			lease = rules.Rules
		}
	}
	if len(main) == 0 || len(lease) == 0 {
		t.Fatalf("the chart rendered no service rules (%d) or lease rules (%d)", len(main), len(lease))
	}
	return main, lease
}

// logSink collects the service's slog output and client-go's klog output, to show the
// permission errors behind a failed scenario.
type logSink struct {
	testfix.SyncBuffer
}

// forbidden returns the distinct permission errors of user logged so far (at most n).
// Structured loggers escape quotes; the lines are returned unescaped.
func (l *logSink) forbidden(user string, n int) []string {
	text := strings.ReplaceAll(l.String(), `\"`, `"`)
	re := regexp.MustCompile(`[^"\s]+( "[^"]+")? is forbidden: User "` + regexp.QuoteMeta(user) + `" cannot [a-z]+ resource "[^"]+"( in API group "[^"]*")?( in the namespace "[^"]*")?`)
	seen := map[string]bool{}
	var out []string
	for _, m := range re.FindAllString(text, -1) {
		if !seen[m] && len(out) < n {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out
}

var klogSink = &logSink{}

func init() {
	klog.LogToStderr(false)
	klog.SetOutput(klogSink)
}

// scenarioRun is one run of the service under a ServiceAccount bound to the given rules.
type scenarioRun struct {
	ns         string
	namespaced bool // rules in a Role in ns, the service watches ns only (no periodic GC)
	main       []rbacv1.PolicyRule
	lease      []rbacv1.PolicyRule
	timeout    time.Duration
}

// run sets up the namespace, identity and fixtures, runs the service as the
// ServiceAccount and checks the scenarios: attach through the HTTP receiver (a ConfigMap
// and, with includeSecrets, a Secret), the built-in watcher attaching a new ReplicaSet's
// revision, and the leader-elected periodic sweep deleting an orphan with an Event. The
// error names the first scenario that failed and the permission errors the service met.
func (r scenarioRun) run(t *testing.T) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout+time.Minute)
	defer cancel()
	admin := cp.Client()
	ensureNamespace(t, ctx, r.ns)
	t.Cleanup(func() {
		_ = admin.CoreV1().Namespaces().Delete(context.Background(), r.ns, metav1.DeleteOptions{})
		_ = admin.RbacV1().ClusterRoles().Delete(context.Background(), r.ns, metav1.DeleteOptions{})
		_ = admin.RbacV1().ClusterRoleBindings().Delete(context.Background(), r.ns, metav1.DeleteOptions{})
	})
	const sa = "configmap-attacher"
	mustCreate(t, func() error {
		_, err := admin.CoreV1().ServiceAccounts(r.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		return err
	})
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: r.ns}}
	if r.namespaced {
		mustCreate(t, func() error {
			_, err := admin.RbacV1().Roles(r.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "service"}, Rules: r.main}, metav1.CreateOptions{})
			return err
		})
		mustCreate(t, func() error {
			_, err := admin.RbacV1().RoleBindings(r.ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "service"},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "service"}, Subjects: subjects}, metav1.CreateOptions{})
			return err
		})
	} else {
		mustCreate(t, func() error {
			_, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: r.ns}, Rules: r.main}, metav1.CreateOptions{})
			return err
		})
		mustCreate(t, func() error {
			_, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: r.ns},
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.ns}, Subjects: subjects}, metav1.CreateOptions{})
			return err
		})
	}
	mustCreate(t, func() error {
		_, err := admin.RbacV1().Roles(r.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "leader-election"}, Rules: r.lease}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := admin.RbacV1().RoleBindings(r.ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "leader-election"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "leader-election"}, Subjects: subjects}, metav1.CreateOptions{})
		return err
	})
	waitRulesEffective(t, ctx, admin, r.ns, "system:serviceaccount:"+r.ns+":"+sa, append(append([]rbacv1.PolicyRule{}, r.main...), r.lease...))

	// A token from the TokenRequest API, as the kubelet mounts it in the pod.
	tr, err := admin.CoreV1().ServiceAccounts(r.ns).CreateToken(ctx, sa, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	saCfg := cp.TokenConfig(tr.Status.Token)

	// Fixtures: a ReplicaSet using a ConfigMap and a Secret revision, and an orphan revision.
	revision := map[string]string{"configmap-attacher.io/revision": "true"}
	mustCreate(t, func() error { return createConfigMap(ctx, admin, r.ns, "attach-cfg", revision) })
	mustCreate(t, func() error {
		_, err := admin.CoreV1().Secrets(r.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "attach-sec", Labels: revision},
			StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error { return createConfigMap(ctx, admin, r.ns, "orphan-cfg", revision) })
	rs, err := createReplicaSet(ctx, admin, r.ns, "attach-rs", "attach-cfg", "attach-sec")
	if err != nil {
		t.Fatal(err)
	}

	// The service, in-process, as the ServiceAccount: gRPC + HTTP, watcher, periodic sweep.
	slogSink := &logSink{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(slogSink), &slog.HandlerOptions{Level: slog.LevelDebug}))
	// The chart's default: the HTTP receiver requires a bearer token.
	opts := server.Options{GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", ClusterName: "in-cluster",
		AllowSecrets: true, Logger: log, ShutdownTimeout: 5 * time.Second, HTTPToken: []byte(rbacHTTPToken)}
	in := server.Ingress{Watch: true}
	if r.namespaced {
		opts.Namespace = r.ns
	} else {
		in.GC = &server.GCOptions{Interval: time.Second, Options: gc.Options{MinAge: 0, Keep: 0}, LeaseNamespace: r.ns}
	}
	klogSink.Reset()
	opts.Ingress = in
	srv, err := server.New(saCfg, opts)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	if r.namespaced {
		// serve's periodic sweep finds namespaces cluster-wide; scoped to one namespace it
		// is the same Sweeper with Namespaces set (see the note in deploy/README.md).
		sw, shutdown, err := namespacedSweeper(saCfg, r.ns, log)
		if err != nil {
			t.Fatal(err)
		}
		defer shutdown()
		go func() { _ = sw.Run(runCtx) }()
	}
	defer func() {
		stop()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the service did not stop within 30s")
		}
	}()

	deadline := time.Now().Add(r.timeout)
	fail := func(scenario string, err error) error {
		user := "system:serviceaccount:" + r.ns + ":" + sa
		lines := append(slogSink.forbidden(user, 3), klogSink.forbidden(user, 3)...)
		if len(lines) == 0 {
			return fmt.Errorf("%s: %w (no permission error logged)", scenario, err)
		}
		return fmt.Errorf("%s: %w; permission errors: %s", scenario, err, strings.Join(lines, " | "))
	}
	base := "http://" + srv.HTTPAddr()
	if err := until(deadline, func() error { return httpGetOK(ctx, "http://"+srv.MetricsAddr()+"/readyz") }); err != nil {
		return fail("ready", err)
	}
	// Scenario attach: the HTTP receiver with a bare ReplicaSet, Secrets included, and the
	// bearer token (without it: 401, nothing attached).
	body, _ := json.Marshal(rs)
	if err := httpPost(ctx, base+"/?includeSecrets=true", body, ""); err == nil || !strings.Contains(err.Error(), ": 401 ") {
		return fmt.Errorf("attach over HTTP without the token: %v, want 401", err)
	}
	if err := until(deadline, func() error {
		return httpPost(ctx, base+"/?includeSecrets=true", body, rbacHTTPToken)
	}); err != nil {
		return fail("attach over HTTP", err)
	}
	for _, obj := range []struct{ kind, name string }{{"ConfigMap", "attach-cfg"}, {"Secret", "attach-sec"}} {
		if err := until(deadline, func() error { return ownedBy(ctx, admin, r.ns, obj.kind, obj.name, rs.UID) }); err != nil {
			return fail("attach over HTTP", err)
		}
	}
	// Scenario watcher: a new ReplicaSet is attached with no event sent.
	if err := createConfigMap(ctx, admin, r.ns, "watch-cfg", revision); err != nil {
		t.Fatal(err)
	}
	wrs, err := createReplicaSet(ctx, admin, r.ns, "watch-rs", "watch-cfg", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := until(deadline, func() error { return ownedBy(ctx, admin, r.ns, "ConfigMap", "watch-cfg", wrs.UID) }); err != nil {
		return fail("watcher", err)
	}
	// Scenario leader election: one replica holds the sweep's Lease (periodic sweeps are
	// leader-only; sweeps triggered by an attach run on every replica).
	if err := until(deadline, func() error {
		l, err := admin.CoordinationV1().Leases(r.ns).Get(ctx, gc.DefaultLeaseName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("no Lease %s: %w", gc.DefaultLeaseName, err)
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return fmt.Errorf("Lease %s has no holder", gc.DefaultLeaseName)
		}
		return nil
	}); err != nil {
		return fail("leader election", err)
	}
	// Scenario GC: the sweep deletes the orphan and records an Event.
	if err := until(deadline, func() error {
		_, err := admin.CoreV1().ConfigMaps(r.ns).Get(ctx, "orphan-cfg", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("orphan-cfg still exists (err %v)", err)
	}); err != nil {
		return fail("gc", err)
	}
	if err := until(deadline, func() error {
		evs, err := admin.CoreV1().Events(r.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=orphan-cfg"})
		if err != nil {
			return err
		}
		for _, e := range evs.Items {
			if e.Reason == "Collected" {
				return nil
			}
		}
		return errors.New("no Collected Event for orphan-cfg")
	}); err != nil {
		return fail("gc event", err)
	}
	for _, obj := range []string{"attach-cfg", "watch-cfg"} {
		if _, err := admin.CoreV1().ConfigMaps(r.ns).Get(ctx, obj, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("gc: %s, which a live ReplicaSet uses, is gone: %w", obj, err)
		}
	}
	return nil
}

// TestServiceUnderShippedRBAC runs the service with a ServiceAccount token bound to the
// chart's ClusterRole and leader-election Role (not as admin): the attach, watcher and GC
// scenarios pass. Then, for each rule in turn, the same run with that one rule removed
// must fail with a permission error naming the rule's resource: the role is sufficient
// and minimal. The namespaced variant (rbac.scope=namespace) is run the same way.
func TestServiceUnderShippedRBAC(t *testing.T) {
	controlplane.Require(t, cp)
	for _, variant := range []struct {
		name       string
		namespaced bool
	}{{"cluster", false}, {"namespaced", true}} {
		t.Run(variant.name, func(t *testing.T) {
			prefix := "rbac-" + variant.name[:2]
			main, lease := shippedRBAC(t, prefix+"-all", variant.namespaced)
			t.Run("all rules", func(t *testing.T) {
				r := scenarioRun{ns: prefix + "-all", namespaced: variant.namespaced, main: main, lease: lease, timeout: 60 * time.Second}
				if err := r.run(t); err != nil {
					t.Fatalf("the service fails under the shipped RBAC: %v", err)
				}
			})
			type removal struct {
				name        string
				main, lease []rbacv1.PolicyRule
				resources   []string
			}
			var removals []removal
			for i, rule := range main {
				removals = append(removals, removal{name: ruleName(rule), main: without(main, i), lease: lease, resources: rule.Resources})
			}
			for i, rule := range lease {
				removals = append(removals, removal{name: "lease " + ruleName(rule), main: main, lease: without(lease, i), resources: rule.Resources})
			}
			for i, rm := range removals {
				t.Run("without "+rm.name, func(t *testing.T) {
					r := scenarioRun{ns: fmt.Sprintf("%s-%d", prefix, i), namespaced: variant.namespaced, main: rm.main, lease: rm.lease, timeout: 10 * time.Second}
					err := r.run(t)
					if err == nil {
						t.Fatalf("every scenario passed without the rule %s: the role is not minimal", rm.name)
					}
					named := false
					for _, res := range rm.resources {
						named = named || strings.Contains(err.Error(), fmt.Sprintf("resource %q", res))
					}
					if !strings.Contains(err.Error(), "forbidden") || !named {
						t.Fatalf("failed, but not with a permission error on %v: %v", rm.resources, err)
					}
					t.Logf("fails as it should: %v", err)
				})
			}
		})
	}
}

func ruleName(r rbacv1.PolicyRule) string {
	return fmt.Sprintf("%s %v", strings.Join(r.Resources, ","), r.Verbs)
}

func without(rules []rbacv1.PolicyRule, i int) []rbacv1.PolicyRule {
	out := append([]rbacv1.PolicyRule{}, rules[:i]...)
	return append(out, rules[i+1:]...)
}

// waitRulesEffective waits until the authorizer allows user the first verb of every rule.
func waitRulesEffective(t *testing.T, ctx context.Context, admin kubernetes.Interface, ns, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	controlplane.Eventually(t, 30*time.Second, "RBAC bindings in effect", func() error {
		for _, r := range rules {
			attrs := &authzv1.ResourceAttributes{Namespace: ns, Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0]}
			if len(r.ResourceNames) > 0 {
				attrs.Name = r.ResourceNames[0]
			}
			if res, sub, ok := strings.Cut(attrs.Resource, "/"); ok {
				attrs.Resource, attrs.Subresource = res, sub
			}
			sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
				User: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}, ResourceAttributes: attrs}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			if !sar.Status.Allowed {
				return fmt.Errorf("%s %s not allowed yet", attrs.Verb, attrs.Resource)
			}
		}
		return nil
	})
}

func mustCreate(t *testing.T, f func() error) {
	t.Helper()
	if err := f(); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func createConfigMap(ctx context.Context, kc kubernetes.Interface, ns, name string, labels map[string]string) error {
	_, err := kc.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	return err
}

// createReplicaSet creates a ReplicaSet (0 replicas) whose pod template mounts configMap
// and, when set, secret.
func createReplicaSet(ctx context.Context, kc kubernetes.Interface, ns, name, configMap, secret string) (*appsv1.ReplicaSet, error) {
	sel := map[string]string{"app": name}
	vols := []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}}}
	if secret != "" {
		vols = append(vols, corev1.Volume{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}})
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: sel}, Spec: appsv1.ReplicaSetSpec{
		Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: sel},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}, Volumes: vols}}}}
	out, err := kc.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating ReplicaSet %s: %w", name, err)
	}
	gvks, _, err := scheme.Scheme.ObjectKinds(out)
	if err == nil && len(gvks) > 0 {
		out.SetGroupVersionKind(gvks[0])
	}
	return out, nil
}

func ownedBy(ctx context.Context, kc kubernetes.Interface, ns, kind, name string, uid types.UID) error {
	var refs []metav1.OwnerReference
	switch kind {
	case "Secret":
		s, err := kc.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		refs = s.OwnerReferences
	default:
		c, err := kc.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		refs = c.OwnerReferences
	}
	for _, r := range refs {
		if r.UID == uid {
			return nil
		}
	}
	return fmt.Errorf("%s %s has no ownerReference to ReplicaSet uid %s (owners %v)", kind, name, uid, refs)
}

func httpGetOK(ctx context.Context, url string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return nil
}

// rbacHTTPToken is the bearer token of the service under test.
const rbacHTTPToken = "rbac-test-token"

// httpPost posts body, with the bearer token when it is not empty.
func httpPost(ctx context.Context, url string, body []byte, token string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return nil
}

// until polls f every 100 ms until it succeeds or deadline passes, returning the last error.
func until(deadline time.Time, f func() error) error {
	for {
		err := f()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

var _ runtime.Object = (*appsv1.ReplicaSet)(nil)

// namespacedSweeper is serve's periodic sweep (server.Ingress.GC) limited to namespace ns:
// leader-elected on a Lease in ns, Events recorded through client-go's broadcaster.
func namespacedSweeper(cfg *rest.Config, ns string, log *slog.Logger) (*gc.Sweeper, func(), error) {
	clients, err := kube.NewClients(cfg)
	if err != nil {
		return nil, nil, err
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: clients.Kube.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: kube.UserAgent})
	sw, err := gc.NewSweeper(gc.Config{Cluster: "in-cluster", Client: clients.Kube, AllowSecrets: true,
		Source:   gc.LiveSource{Client: clients.Kube, Dynamic: clients.Dynamic, Metadata: clients.Metadata, IncludeSecrets: true},
		Recorder: recorder, Logger: log, Interval: time.Second, Namespaces: []string{ns},
		LeaderElection: &gc.LeaderElection{Namespace: ns}})
	if err != nil {
		broadcaster.Shutdown()
		return nil, nil, fmt.Errorf("gc.NewSweeper: %w", err)
	}
	return sw, broadcaster.Shutdown, nil
}
