package core_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

var cmGR = schema.GroupResource{Resource: "configmaps"}

func TestIsPermanent(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"RBAC forbids the write", apierrors.NewForbidden(cmGR, "a", errors.New(`User "x" cannot patch resource "configmaps"`)), true},
		{"an admission webhook denies (403)", apierrors.NewForbidden(cmGR, "a", errors.New(`admission webhook "deny.example.com" denied the request`)), true},
		{"a policy denies as Invalid (422)", apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "a", field.ErrorList{field.Invalid(field.NewPath("metadata"), "x", "denied")}), true},
		{"bad request", apierrors.NewBadRequest("error decoding patch"), true},
		{"request entity too large", apierrors.NewRequestEntityTooLargeError("limit is 3145728"), true},
		{"etcd refuses a too-large object (a bare 500)", storageError("etcdserver: request is too large"), true},
		{"the etcd client refuses a too-large object", storageError("rpc error: code = ResourceExhausted desc = trying to send message larger than max (2343166 vs. 2097152)"), true},
		{"another bare 500", storageError("etcdserver: leader changed"), false},
		{"method not supported", apierrors.NewMethodNotSupported(cmGR, "patch"), true},
		{"credentials rejected", apierrors.NewUnauthorized("Unauthorized"), true},
		{"wrapped permanent error", fmt.Errorf("writing: %w", apierrors.NewForbidden(cmGR, "a", errors.New("no"))), true},
		{"conflict", apierrors.NewConflict(cmGR, "a", errors.New("modified")), false},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1), false},
		{"service unavailable", apierrors.NewServiceUnavailable("etcd leader changed"), false},
		{"server timeout", apierrors.NewServerTimeout(cmGR, "patch", 1), false},
		{"gateway timeout", apierrors.NewTimeoutError("took too long", 1), false},
		{"other internal error", apierrors.NewInternalError(errors.New("etcdserver: leader changed")), false},
		{"webhook unreachable (failurePolicy Fail)", apierrors.NewInternalError(errors.New(`failed calling webhook "deny.example.com": connection refused`)), false},
		{"network error", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, false},
		{"deadline", context.DeadlineExceeded, false},
		{"not found is decided by the caller", apierrors.NewNotFound(cmGR, "a"), false},
		{"nil", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, core.IsPermanent(tc.err), "%v", tc.err)
		})
	}
}

// Result errors: permanent failures alone give ErrPermanent with one *PermanentError per
// object; any transient failure makes the whole call ErrUnavailable (a retry redoes it).
func TestAttachErrorClass(t *testing.T) {
	forbidden := apierrors.NewForbidden(cmGR, "a", errors.New(`User "x" cannot patch resource "configmaps"`))
	unavailable := apierrors.NewServiceUnavailable("etcd leader changed")
	cases := []struct {
		name          string
		fail          map[string]error // ConfigMap name -> the patch's error
		wantPermanent []string         // objects named by *PermanentError
		wantTransient bool
	}{
		{name: "one permanent", fail: map[string]error{"a": forbidden}, wantPermanent: []string{"ConfigMap shop/a"}},
		{name: "two permanent", fail: map[string]error{"a": forbidden, "b": apierrors.NewBadRequest("bad")},
			wantPermanent: []string{"ConfigMap shop/a", "ConfigMap shop/b"}},
		{name: "transient wins over permanent", fail: map[string]error{"a": forbidden, "b": unavailable}, wantTransient: true},
		{name: "transient alone", fail: map[string]error{"b": unavailable}, wantTransient: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, ev := unitAttacher(t, tc.fail, "a", "b", "c")
			res, err := a.Attach(context.Background(), ev)
			require.Error(t, err)
			assert.Equal(t, tc.wantTransient, errors.Is(err, core.ErrUnavailable), "%v", err)
			assert.Equal(t, !tc.wantTransient, errors.Is(err, core.ErrPermanent), "%v", err)
			assert.Equal(t, core.OutcomeAttached, outcomes(res)["ConfigMap/c"], "the other objects are written")
			var named []string
			var pe *core.PermanentError
			for _, e := range unwrapAll(err) {
				if errors.As(e, &pe) {
					named = append(named, pe.Object)
					assert.True(t, core.IsPermanent(pe.Cause), "the cause is the apiserver's error: %v", pe.Cause)
				}
			}
			assert.ElementsMatch(t, tc.wantPermanent, named)
			for name, cause := range tc.fail {
				o := resultFor(res, core.KindConfigMap, name)
				assert.Equal(t, core.OutcomeError, o.Outcome)
				assert.Equal(t, !core.IsPermanent(cause), o.Transient)
				assert.Contains(t, err.Error(), "ConfigMap shop/"+name)
			}
		})
	}
}

// storageError is the apiserver's answer to a storage failure it does not classify: code
// 500, no reason (as observed for etcd's size refusals).
func storageError(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 500, Message: msg}}
}
