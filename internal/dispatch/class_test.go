package dispatch

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/event"
)

func TestClassifyNamesEveryErrorItsClass(t *testing.T) {
	permanent := &core.PermanentError{Object: "ConfigMap shop/a", Cause: errors.New("forbidden")}
	for _, tc := range []struct {
		name string
		err  error
		want Class
	}{
		{"nil is ok", nil, ClassOK},
		{"not an ADD is ignored", &event.NotAddError{}, ClassIgnored},
		{"bad input", core.Invalidf("x", "y"), ClassInvalid},
		{"a safety rule", &core.RefusedError{Reason: "r"}, ClassRefused},
		{"a timeout wins over unavailable", errors.Join(core.ErrUnavailable, context.DeadlineExceeded), ClassDeadline},
		{"unavailable", core.ErrUnavailable, ClassUnavailable},
		{"a transient object wins over a permanent one", errors.Join(permanent, core.ErrUnavailable), ClassUnavailable},
		{"permanent", permanent, ClassPermanent},
		{"busy", ErrBusy, ClassBusy},
		{"shutting down", ErrShuttingDown, ClassShuttingDown},
		{"unsupported", ErrUnsupported, ClassUnsupported},
		{"unauthenticated", ErrUnauthenticated, ClassUnauthenticated},
		{"anything else", errors.New("boom"), ClassFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Classify(tc.err), "%v", tc.err)
		})
	}
}

func TestRetryableClassesAreTheTransientOnes(t *testing.T) {
	retry := map[Class]bool{ClassBusy: true, ClassShuttingDown: true, ClassDeadline: true, ClassCanceled: true,
		ClassUnavailable: true, ClassFailed: true}
	for _, c := range Classes {
		assert.Equal(t, retry[c], c.Retryable(), "%s", c)
	}
}
