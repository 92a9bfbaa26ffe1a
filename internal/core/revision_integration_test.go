package core_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// ownerKinds renders owners "Kind/name" with a ControllerRevision's hash cut off.
func ownerKinds(owners []string) []string {
	out := make([]string, 0, len(owners))
	for _, o := range owners {
		if strings.HasPrefix(o, "ControllerRevision/") {
			o = o[:strings.LastIndex(o, "-")]
		}
		out = append(out, o)
	}
	sort.Strings(out)
	return out
}

// Rule 9's entry point (issue 16): a revision created after its users is attached from
// its own event to every live user, from live reads (the one-shot CLI) and from the
// informer cache (the service), idempotently.
func TestAttachRevisionToEveryUser(t *testing.T) {
	for _, reader := range []string{"live", "cache"} {
		t.Run(reader, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			e.replicaSet("web-1", nil, podTemplate("web", "cfg"))
			for _, kind := range []string{"StatefulSet", "DaemonSet", "Job", "CronJob", "Pod"} {
				e.user(kind, strings.ToLower(kind), podTemplate(strings.ToLower(kind), "cfg"))
			}
			cm := e.revision("cfg") // after its users: no ReplicaSet ADD will come for it
			a := e.attacher
			if reader == "cache" {
				a = e.cachedAttacher()
			}
			ev := core.RevisionEvent{Kind: core.KindConfigMap, Namespace: e.ns, Name: "cfg", UID: cm.UID, Options: core.DefaultOptions()}
			want := []string{"ControllerRevision/daemonset", "ControllerRevision/statefulset", "CronJob/cronjob", "Job/job", "Pod/pod", "ReplicaSet/web-1"}

			dry := ev
			dry.Options.DryRun = true
			e.counter.Reset()
			res, err := a.AttachRevision(ctx, dry)
			require.NoError(t, err)
			require.Len(t, res.Objects, 1)
			assert.Equal(t, core.OutcomeWouldAttach, res.Objects[0].Outcome, "%+v", res.Objects[0])
			assert.Equal(t, want, ownerKinds(res.Objects[0].Owners))
			assert.Zero(t, e.counter.Writes())

			res, err = a.AttachRevision(ctx, ev)
			require.NoError(t, err)
			assert.Equal(t, core.OutcomeAttached, res.Objects[0].Outcome, "%+v", res.Objects[0])
			assert.Equal(t, want, ownerKinds(res.Objects[0].Owners))
			assert.Equal(t, fmt.Sprintf("local: ConfigMap %s/cfg: 1 attached", e.ns), res.Summary())
			assert.Len(t, e.owners(core.KindConfigMap, "cfg"), len(want))

			if reader == "cache" {
				controlplane.Eventually(t, 10*time.Second, "the cache to see the owners", func() error {
					res, err = a.AttachRevision(ctx, dry)
					if err == nil && res.Objects[0].Outcome != core.OutcomeAlreadyAttached {
						err = fmt.Errorf("%+v", res.Objects[0])
					}
					return err
				})
			}
			e.counter.Reset()
			res, err = a.AttachRevision(ctx, ev)
			require.NoError(t, err)
			assert.Equal(t, core.OutcomeAlreadyAttached, res.Objects[0].Outcome, "%+v", res.Objects[0])
			assert.Zero(t, e.counter.Writes(), "rule 5: a replay writes nothing")
		})
	}
}

// AttachRevision's refusals and skips: each with its reason, none writes.
func TestAttachRevisionEligibility(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.configMap("plain", nil) // used by a template, not opted in, not listed
	e.configMap("listed", nil)
	e.revision("unused")
	skip := e.revision("skipped")
	skip.Annotations = map[string]string{core.AnnotationSkip: "true"}
	_, err := e.kc.CoreV1().ConfigMaps(e.ns).Update(ctx, skip, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = e.kc.CoreV1().Secrets(e.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec",
		Labels: map[string]string{core.LabelRevision: "true"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	e.replicaSet("web-1", nil, podTemplate("web", "plain", "skipped"))
	// A Deployment whose annotation lists "listed": its ReplicaSet (made by the real
	// Deployment controller) becomes the owner although its template does not use it.
	tmpl := podTemplate("dep")
	d, err := e.kc.AppsV1().Deployments(e.ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "dep", Annotations: map[string]string{core.AnnotationConfigMaps: "listed"}},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}, Template: tmpl},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var depRS *appsv1.ReplicaSet
	controlplane.Eventually(t, 30*time.Second, "the Deployment's ReplicaSet", func() error {
		depRS, err = core.CurrentReplicaSet(ctx, e.kc, e.dc, "Deployment", e.ns, d.Name)
		return err
	})

	ev := func(kind core.Kind, name string, mutate ...func(*core.RevisionEvent)) core.RevisionEvent {
		r := core.RevisionEvent{Kind: kind, Namespace: e.ns, Name: name, Options: core.DefaultOptions()}
		for _, m := range mutate {
			m(&r)
		}
		return r
	}
	cases := []struct {
		name    string
		ev      core.RevisionEvent
		want    core.Outcome
		reason  string
		wantErr error
	}{
		{"unlabelled and unlisted: skipped", ev(core.KindConfigMap, "plain"), core.OutcomeSkipped, "not opted in", nil},
		{"nothing uses it: skipped", ev(core.KindConfigMap, "unused"), core.OutcomeSkipped, "no live workload", nil},
		{"skip annotation: skipped", ev(core.KindConfigMap, "skipped"), core.OutcomeSkipped, core.AnnotationSkip, nil},
		{"a Secret without includeSecrets: skipped", ev(core.KindSecret, "sec"), core.OutcomeSkipped, "Secrets are not enabled", nil},
		{"gone: missing", ev(core.KindConfigMap, "never-existed"), core.OutcomeMissing, "not found", nil},
		{"forged UID: refused", ev(core.KindConfigMap, "plain", func(r *core.RevisionEvent) { r.UID = types.UID("0d9e2c8a-0000-4000-8000-000000000000") }), "", "", core.ErrRefused},
		{"other namespace than the spec's: refused", ev(core.KindConfigMap, "plain", func(r *core.RevisionEvent) { r.Options.Namespace = "kube-system" }), "", "", core.ErrRefused},
		{"bad kind: invalid", ev("Pod", "plain"), "", "", core.ErrInvalid},
		{"bad name: invalid", ev(core.KindConfigMap, "Bad_Name"), "", "", core.ErrInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.counter.Reset()
			res, err := e.attacher.AttachRevision(ctx, tc.ev)
			assert.Zero(t, e.counter.Writes())
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Len(t, res.Objects, 1)
			assert.Equal(t, tc.want, res.Objects[0].Outcome, "%+v", res.Objects[0])
			assert.Contains(t, res.Objects[0].Reason, tc.reason)
		})
	}

	t.Run("listed by a Deployment's annotation: attached to its ReplicaSet", func(t *testing.T) {
		res, err := e.attacher.AttachRevision(ctx, ev(core.KindConfigMap, "listed"))
		require.NoError(t, err)
		assert.Equal(t, core.OutcomeAttached, res.Objects[0].Outcome, "%+v", res.Objects[0])
		assert.Equal(t, []types.UID{depRS.UID}, ownerUIDs(e.owners(core.KindConfigMap, "listed")))
	})
	t.Run("the namespace policy refuses before reading", func(t *testing.T) {
		policy, err := core.ParseNamespacePolicy(nil, []string{e.ns})
		require.NoError(t, err)
		guarded, err := core.NewAttacher(core.Config{Client: e.kc, Reader: core.LiveReader{Client: e.kc}, Namespaces: policy, Logger: testfix.Quiet()})
		require.NoError(t, err)
		_, err = guarded.AttachRevision(ctx, ev(core.KindConfigMap, "listed"))
		require.ErrorIs(t, err, core.ErrRefused)
	})
}
