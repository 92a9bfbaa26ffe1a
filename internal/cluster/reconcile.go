package cluster

import (
	"errors"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// reconcileLocked makes the registered Argo CD clusters what admissionLocked decides:
// it unregisters those no longer admitted (or changed) and returns them for r.stop,
// registers and starts the newly admitted, and reports every refused Secret. Nothing
// happens before the first list of Secrets is complete. r.mu must be held.
func (r *Registry) reconcileLocked() []*member {
	if !r.argoListed.Load() {
		return nil
	}
	admit, refused := r.admissionLocked()
	var stopped []*member
	for _, key := range sortedKeys(r.secrets) {
		name := r.secrets[key]
		if c, ok := admit[key]; !ok || c.alias || r.members[name] == nil || r.members[name].fingerprint != c.fp || r.members[name].pin != c.pin {
			if m := r.unregisterLocked(key); m != nil {
				stopped = append(stopped, m)
			}
		}
	}
	aliases := map[string]*claim{}
	for _, key := range sortedKeys(admit) {
		c := admit[key]
		if c.alias {
			aliases[key] = c
			continue
		}
		if _, ok := r.secrets[key]; ok {
			continue
		}
		if other, taken := r.members[c.spec.Name]; taken { // a static cluster: refused above already
			refused[key] = refusal{ReasonNameTaken, "cluster name " + c.spec.Name + " is already registered by " + other.c.Spec.Origin, nil}
			continue
		}
		m, err := r.newMember(c.spec)
		if err != nil {
			refused[key] = refusal{ReasonInvalid, err.Error(), nil}
			continue
		}
		m.secret, m.fingerprint, m.pin = key, c.fp, c.pin
		r.members[c.spec.Name] = m
		r.secrets[key] = c.spec.Name
		r.startLocked(m)
	}
	r.setAliasesLocked(aliases)
	r.reportLocked(refused)
	return stopped
}

// reportLocked rebuilds the statuses of the Secrets not served and warns (log and a
// Kubernetes Warning Event on the Secret) about each whose refusal is new or changed.
func (r *Registry) reportLocked(refused map[string]refusal) {
	prev := r.invalid
	r.invalid = map[string]Status{}
	for _, key := range sortedKeys(r.claims) {
		c := r.claims[key]
		st := Status{Name: c.name, Source: SourceArgoCD, Origin: "Argo CD Secret " + key, Server: c.server}
		switch rf, ok := refused[key]; {
		case c.err != nil:
			st.Error, st.Reason = c.err.Error(), c.reason
		case ok:
			st.Name, st.Error, st.Reason, st.Conflicts = c.spec.Name, "Argo CD cluster Secret "+key+": "+rf.why, rf.reason, rf.others
		default:
			continue
		}
		r.invalid[key] = st
		if p, ok := prev[key]; ok && p.Error == st.Error {
			continue
		}
		r.log.Warn("Argo CD cluster Secret not served", "secret", key, "cluster", st.Name, "reason", st.Reason,
			"conflicts", st.Conflicts, "error", st.Error)
		r.argoEvents.warn(key, c.uid, st)
	}
}

// isExecRefusal reports whether err refuses a credential plugin.
func isExecRefusal(err error) bool { return errors.Is(err, ErrExecNotAllowed) }

// namespacePolicy is cluster sp's namespace policy: the service's (p), limited to the
// Spec's Namespaces (an Argo CD Secret's "namespaces") when it lists any, for events
// and sweeps alike (the caches are limited by Runtime.buildCaches).
func namespacePolicy(p core.NamespacePolicy, sp Spec) core.NamespacePolicy {
	if len(sp.Namespaces) > 0 {
		p.Limit, p.LimitBy = slices.Clone(sp.Namespaces), "cluster "+sp.Name+" ("+sp.Origin+")"
	}
	return p
}

// argoEvents records Warning Events on Argo CD cluster Secrets (in their namespace of
// the default cluster). A nil *argoEvents records nothing.
type argoEvents struct {
	rec  record.EventRecorder
	stop func()
}

func newArgoEvents(client kubernetes.Interface) *argoEvents {
	rec, stop := kube.NewBroadcastRecorder(client)
	return &argoEvents{rec: rec, stop: stop}
}

func (e *argoEvents) warn(key string, uid types.UID, st Status) {
	if e == nil {
		return
	}
	ns, name, _ := strings.Cut(key, "/")
	obj := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid}}
	e.rec.Event(obj, corev1.EventTypeWarning, "ClusterSecretRefused", st.Error)
}
