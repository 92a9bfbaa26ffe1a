package eventbus_test

import (
	"errors"
	"testing"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/event"
	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
)

// FuzzMessage: how the EventBus subscription answers a message it cannot handle. Any
// message body decodes to an ADD event, is ignored (acked: not an ADD) or is bad input,
// which is terminated (never redelivered forever with Nak); never a panic.
func FuzzMessage(f *testing.F) {
	for _, s := range []string{
		`{"specversion":"1.0","id":"1","source":"replicasets","type":"resource","datacontenttype":"application/json",` +
			`"data":{"type":"ADD","body":{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-1","namespace":"shop","uid":"u"}}}}`,
		`{"type":"UPDATE","body":{"kind":"ReplicaSet","metadata":{"name":"a","namespace":"b"}}}`,
		`{"type":"ADD","body":{"kind":"ReplicaSet","metadata":{"name":"` + string(make([]byte, 300)) + `","namespace":"b"}}}`,
		`{"specversion":"1.0","data_base64":"!!"}`, `null`, `{"a":{"a":{"a":{"a":1}}}}`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := event.Decode(data)
		switch out := eventbus.Classify(dispatch.Classify(err)); out {
		case eventbus.OutcomeAck:
			if err := d.Event.Validate(); err != nil {
				t.Fatalf("acked an invalid event: %v", err)
			}
		case eventbus.OutcomeIgnore:
			if !errors.Is(err, event.ErrNotAdd) {
				t.Fatalf("ignored a message that is not a non-ADD event: %v", err)
			}
		case eventbus.OutcomeTerm:
			if !errors.Is(err, core.ErrInvalid) {
				t.Fatalf("terminated without ErrInvalid: %v", err)
			}
		default:
			t.Fatalf("a decode failure is %s (would redeliver forever): %v", out, err)
		}
	})
}
