package deploytest

import (
	"strings"
	"testing"

	"github.com/argoproj/argo-events/pkg/apis/events/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestChartEventBusAuth: eventBusAuth.existingSecret names Argo Events' EventBus
// accessSecret (the Secret its Sensors use); the chart mounts its key read-only as the
// file --eventbus-auth-file reads. Without a direct subscription, next to other EventBus
// credentials, or with the flag set by hand, rendering fails naming the values. Every
// rendering that succeeds is a valid serve command line.
func TestChartEventBusAuth(t *testing.T) {
	const bus = "flags: {eventbus-url: nats://eventbus-default-js-svc.argo-events.svc:4222}\n"
	tests := []struct {
		name   string
		values string
		errs   []string
		// want is the Secret key mounted as --eventbus-auth-file (nil: none).
		want *secretKey
	}{
		{name: "the accessSecret, its client-auth key", values: bus + "eventBusAuth: {existingSecret: eventbus-default-js-client-auth}",
			want: &secretKey{"eventbus-default-js-client-auth", v1alpha1.JetStreamClientAuthSecretKey}}, // the key the pinned Argo Events writes
		{name: "another key", values: bus + "eventBusAuth: {existingSecret: my-bus, key: auth.yaml}", want: &secretKey{"my-bus", "auth.yaml"}},
		{name: "unset: no file", values: bus},
		{name: "without a subscription: rendering fails", values: "eventBusAuth: {existingSecret: eventbus-default-js-client-auth}",
			errs: []string{"eventBusAuth.existingSecret needs flags.eventbus-url"}},
		{name: "next to a token file: rendering fails",
			values: "flags: {eventbus-url: nats://x:4222, eventbus-token-file: /t}\neventBusAuth: {existingSecret: s}",
			errs:   []string{"unset flags.eventbus-token-file"}},
		{name: "the flag is the chart's", values: "flags: {eventbus-url: nats://x:4222, eventbus-auth-file: /a}",
			errs: []string{"flags.eventbus-auth-file is set by the chart"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			values := tc.values + "\nhttpAuth: {existingSecret: my-token}\n"
			if tc.errs != nil {
				err := renderError(t, values)
				if err == nil {
					t.Fatal("the chart rendered; want an error")
				}
				for _, want := range tc.errs {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				return
			}
			objs := renderObjects(t, values)
			if got := secretFile(t, objs, "--eventbus-auth-file="); !equalKey(got, tc.want) {
				t.Errorf("--eventbus-auth-file from %v, want %v", got, tc.want)
			}
			if tc.want != nil && !mountReadOnly(objs, "eventbus-auth") {
				t.Error("the eventbus-auth volume is not mounted read-only")
			}
			o := parseServeArgs(t, containerArgs(t, objs))
			if err := o.Validate(); err != nil {
				t.Errorf("serve rejects the rendered arguments: %v", err)
			}
		})
	}
}

// mountReadOnly reports whether the service container mounts volume name read-only.
func mountReadOnly(objs []*unstructured.Unstructured, name string) bool {
	cs, _, _ := unstructured.NestedSlice(find(objs, "Deployment", releaseName).Object, "spec", "template", "spec", "containers")
	mounts, _ := nested(cs[0].(map[string]any), "volumeMounts").([]any)
	for _, m := range mounts {
		mm := m.(map[string]any)
		if mm["name"] == name {
			return mm["readOnly"] == true
		}
	}
	return false
}
