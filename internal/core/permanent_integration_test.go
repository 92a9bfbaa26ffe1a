package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
)

// requirePermanent asserts that err is an ErrPermanent (and not ErrUnavailable) whose
// *PermanentError names object and carries an apiserver error matching is.
func requirePermanent(t *testing.T, err error, object string, is func(error) bool) {
	t.Helper()
	require.ErrorIs(t, err, core.ErrPermanent)
	require.NotErrorIs(t, err, core.ErrUnavailable, "a permanent failure is not retried")
	var pe *core.PermanentError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, object, pe.Object)
	assert.True(t, is(pe.Cause), "cause: %v", pe.Cause)
	assert.Contains(t, err.Error(), strings.SplitN(object, " ", 2)[1], "the message names the object")
}

// Rule 8: RBAC that does not allow a read or the patch is a permanent failure naming the
// object, on the real apiserver with a ServiceAccount token.
func TestPermanentForbidden(t *testing.T) {
	read := func(group, resource string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{resource}, Verbs: []string{"get"}}
	}
	cases := []struct {
		name   string
		rules  []rbacv1.PolicyRule
		object func(ns string) string
	}{
		{"no patch right on ConfigMaps", []rbacv1.PolicyRule{read("apps", "replicasets"), read("", "configmaps")},
			func(ns string) string { return "ConfigMap " + ns + "/cfg-1" }},
		{"no read right on ConfigMaps", []rbacv1.PolicyRule{read("apps", "replicasets")},
			func(ns string) string { return "ConfigMap " + ns + "/cfg-1" }},
		{"no read right on ReplicaSets", []rbacv1.PolicyRule{read("", "configmaps")},
			func(ns string) string { return "ReplicaSet " + ns + "/web-1" }},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			a := e.restrictedAttacher(fmt.Sprintf("narrow-%d", i), tc.rules)
			e.revision("cfg-1")
			rs := e.replicaSet("web-1", nil, podTemplate("web", "cfg-1"))
			res, err := a.Attach(context.Background(), e.event(rs, core.DefaultOptions()))
			requirePermanent(t, err, tc.object(e.ns), apierrors.IsForbidden)
			assert.Empty(t, e.owners(core.KindConfigMap, "cfg-1"))
			for _, o := range res.Objects {
				assert.False(t, o.Transient, "%+v", o)
			}
		})
	}
}

// denyPolicy installs a ValidatingAdmissionPolicy (and its binding) that denies every
// update of a ConfigMap labelled cma-test-deny in e.ns, with the given reason, and waits
// until the apiserver enforces it.
func (e *env) denyPolicy(reason metav1.StatusReason) {
	e.t.Helper()
	ctx := context.Background()
	name := "deny-" + e.ns
	fail := admissionv1.Fail
	_, err := e.kc.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{Operations: []admissionv1.OperationType{admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}}}}}},
			Validations: []admissionv1.Validation{{
				Expression: "!has(object.metadata.labels) || !('cma-test-deny' in object.metadata.labels)",
				Message:    "test policy: this ConfigMap may not change", Reason: &reason}},
		},
	}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	_, err = e.kc.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
			MatchResources: &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: e.ns}}}},
	}, metav1.CreateOptions{})
	require.NoError(e.t, err)
	e.t.Cleanup(func() {
		_ = e.kc.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = e.kc.AdmissionregistrationV1().ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	e.configMap("probe", map[string]string{"cma-test-deny": "true"})
	controlplane.Eventually(e.t, 30*time.Second, "the policy to be enforced", func() error {
		_, err := e.kc.CoreV1().ConfigMaps(e.ns).Patch(ctx, "probe", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"probe":"`+time.Now().Format(time.RFC3339Nano)+`"}}}`), metav1.PatchOptions{})
		if err == nil {
			return errors.New("not enforced yet")
		}
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
			return nil
		}
		return err
	})
}

// Rule 8: an admission policy's denial is permanent for the denied object; the other
// objects of the same ReplicaSet are still attached.
func TestPermanentAdmissionDenied(t *testing.T) {
	for _, tc := range []struct {
		reason metav1.StatusReason
		is     func(error) bool
	}{
		{metav1.StatusReasonForbidden, apierrors.IsForbidden},
		{metav1.StatusReasonInvalid, apierrors.IsInvalid},
	} {
		t.Run(string(tc.reason), func(t *testing.T) {
			e := newEnv(t)
			e.denyPolicy(tc.reason)
			e.configMap("locked", map[string]string{core.LabelRevision: "true", "cma-test-deny": "true"})
			e.revision("free")
			rs := e.replicaSet("web-1", nil, podTemplate("web", "locked", "free"))
			res, err := e.attacher.Attach(context.Background(), e.event(rs, core.DefaultOptions()))
			requirePermanent(t, err, "ConfigMap "+e.ns+"/locked", tc.is)
			assert.Contains(t, err.Error(), "test policy: this ConfigMap may not change", "the policy's message reaches the caller")
			assert.Equal(t, core.OutcomeError, outcomes(res)["ConfigMap/locked"])
			assert.Equal(t, core.OutcomeAttached, outcomes(res)["ConfigMap/free"])
			assert.Empty(t, e.owners(core.KindConfigMap, "locked"))
		})
	}
}

// Rule 8: an object that the owner would make larger than etcd accepts is a permanent
// failure. The ConfigMap is built as large as the apiserver still stores (data at the
// 1 MiB limit, then as many ownerReferences as fit), so that one more owner is refused.
func TestPermanentTooLarge(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rs := e.replicaSet("web-1", nil, podTemplate("web", "big"))
	// Find the largest owner count the apiserver stores by bisection over creations.
	create := func(n int, keep bool) error {
		owners := make([]metav1.OwnerReference, n)
		for i := range owners {
			owners[i] = metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Filler", Name: fmt.Sprintf("filler-%06d", i),
				UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))}
		}
		err := retryServerTimeouts(func() error {
			_, err := e.kc.CoreV1().ConfigMaps(e.ns).Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "big", Labels: map[string]string{core.LabelRevision: "true"}, OwnerReferences: owners},
				Data:       map[string]string{"blob": strings.Repeat("x", 1<<20-len("blob"))},
			}, metav1.CreateOptions{})
			return err
		})
		if err == nil && !keep {
			require.NoError(t, e.kc.CoreV1().ConfigMaps(e.ns).Delete(ctx, "big", metav1.DeleteOptions{}))
		}
		return err
	}
	lo, hi := 0, 8192 // create(lo) succeeds, create(hi) fails
	require.NoError(t, create(lo, false))
	err := create(hi, false)
	require.True(t, core.IsPermanent(err), "a ConfigMap with %d owners must be refused permanently: %v", hi, err)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if err := create(mid, false); err == nil {
			lo = mid
		} else {
			require.True(t, core.IsPermanent(err), "%v", err)
			hi = mid
		}
	}
	t.Logf("the largest storable ConfigMap has 1 MiB of data and %d ownerReferences", lo)
	require.NoError(t, create(lo, true))

	err = retryServerTimeouts(func() error {
		_, err := e.attacher.Attach(ctx, e.event(rs, core.DefaultOptions()))
		return err
	})
	requirePermanent(t, err, "ConfigMap "+e.ns+"/big", core.IsPermanent)
	assert.NotContains(t, ownerUIDs(e.owners(core.KindConfigMap, "big")), rs.UID)
}

// retryServerTimeouts runs f again while the apiserver answers that it timed out (it did
// not decide: on a loaded machine a megabyte write can take longer than its request
// timeout), at most five times, and returns f's last error.
func retryServerTimeouts(f func() error) error {
	var err error
	for range 5 {
		if err = f(); !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
	return err
}
