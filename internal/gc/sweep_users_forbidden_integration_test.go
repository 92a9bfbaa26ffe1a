package gc_test

import (
	"context"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// restrictedClients returns clients of a new ServiceAccount sa of e.ns holding exactly
// rules (a Role in e.ns), with a token from the TokenRequest API, as a pod would.
func (e *env) restrictedClients(t *testing.T, sa string, rules []rbacv1.PolicyRule) *kube.Clients {
	t.Helper()
	ctx, kc := context.Background(), e.clients.Kube
	if _, err := kc.CoreV1().ServiceAccounts(e.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.RbacV1().Roles(e.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.RbacV1().RoleBindings(e.ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: e.ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := kc.CoreV1().ServiceAccounts(e.ns).CreateToken(ctx, sa, &authnv1.TokenRequest{
		Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kube.NewClients(e.cp.TokenConfig(tr.Status.Token))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// A cached sweep of a cluster whose RBAC forbids listing one kind of user (Jobs) is not
// held for the life of the cluster waiting for that informer to sync: it fails,
// unavailable, and so does the next one, each returning before the sweeper's context
// ends (the user informers start on demand and the sweep waits for them, bounded:
// docs/design.md, "Per-cluster cost").
func TestCachedSweepIsNotHeldByAUserKindItCannotList(t *testing.T) {
	e := setup(t)
	e.configMap(t, "cfg-1a2b3c", "cfg", nil)
	read := []string{"list", "watch", "get"}
	clients := e.restrictedClients(t, "no-jobs", []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets", "deployments", "statefulsets", "daemonsets", "controllerrevisions"}, Verbs: read},
		{APIGroups: []string{"batch"}, Resources: []string{"cronjobs"}, Verbs: read}, // not jobs
		{APIGroups: []string{""}, Resources: []string{"pods", "configmaps"}, Verbs: read},
		{APIGroups: []string{"argoproj.io"}, Resources: []string{"rollouts"}, Verbs: read},
	})
	c := e.startCacheSyncedWithoutUsers(t, clients)
	e.requireSweepsUnavailable(t, e.cachedSweeper(t, clients, c))
	if !e.exists(t, "cfg-1a2b3c") {
		t.Fatal("the revision was deleted by a sweep that could not read every user")
	}
}
