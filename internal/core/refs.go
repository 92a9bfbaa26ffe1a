package core

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Ref is one ConfigMap or Secret a pod template uses or a user listed.
type Ref struct {
	Kind Kind   `json:"kind"`
	Name string `json:"name"`
	// Optional is true when every reference found is marked optional (the pod starts
	// without the object), false when at least one reference requires it.
	Optional bool `json:"optional,omitempty"`
	// Explicit is true when a trusted source listed the name: an annotation of the
	// workload, ReplicaSet or pod template (written by someone with rights on the
	// workload), or the command line of a one-shot command (Options.TrustListedNames).
	// Explicitly listed objects need no opt-in label.
	Explicit bool `json:"explicit,omitempty"`
	// Listed is true when the event named it (trigger spec, query parameter, header):
	// an untrusted listing, which lifts the opt-in label only for an object the pod
	// template references (safety rule 4, docs/safety.md).
	Listed bool `json:"listed,omitempty"`
	// From says where the reference was found, e.g. "volume/config", "env/app:LEVEL",
	// "envFrom/app", "spec", "annotation".
	From []string `json:"from,omitempty"`
}

// source is where a reference was found.
type source int

const (
	fromTemplate   source = iota // the pod spec references it
	fromAnnotation               // a workload, ReplicaSet or template annotation lists it (trusted)
	fromTrusted                  // the one-shot command's own command line (trusted)
	fromEvent                    // the event names it (untrusted)
)

type refKey struct {
	kind Kind
	name string
}

// refEntry is a Ref and whether the pod template references it.
type refEntry struct {
	Ref
	template bool
}

// refSet collects references keeping the first-seen order.
type refSet struct {
	order []refKey
	m     map[refKey]*refEntry
}

func newRefSet() *refSet { return &refSet{m: map[refKey]*refEntry{}} }

func (s *refSet) add(kind Kind, name string, optional bool, src source, from string) {
	if name == "" {
		return
	}
	k := refKey{kind, name}
	r, ok := s.m[k]
	if !ok {
		r = &refEntry{Ref: Ref{Kind: kind, Name: name, Optional: optional}}
		s.m[k] = r
		s.order = append(s.order, k)
	} else if !optional {
		r.Optional = false
	}
	switch src {
	case fromTemplate:
		r.template = true
	case fromAnnotation, fromTrusted:
		r.Explicit = true
	case fromEvent:
		r.Listed = true
	}
	r.From = append(r.From, from)
}

func (s *refSet) has(kind Kind, name string) bool { _, ok := s.m[refKey{kind, name}]; return ok }

func (s *refSet) list() []Ref {
	out := make([]Ref, 0, len(s.order))
	for _, k := range s.order {
		out = append(out, s.m[k].Ref)
	}
	return out
}

func (s *refSet) entries() []refEntry {
	out := make([]refEntry, 0, len(s.order))
	for _, k := range s.order {
		out = append(out, *s.m[k])
	}
	return out
}

func optional(b *bool) bool { return b != nil && *b }

// PodSpecRefs returns every ConfigMap and Secret a pod spec references: volumes
// (configMap, secret, projected sources, and the Secret references of volume plugins:
// csi.nodePublishSecretRef, azureFile, cephfs, rbd, iscsi, flexVolume, scaleIO,
// storageos, cinder), env valueFrom / envFrom of containers, initContainers and
// ephemeralContainers, and imagePullSecrets. Every one of them must exist for a pod to
// start, so each counts as a use (attach) and keeps a revision alive (orphan sweep).
// Order: first appearance; each name once per kind.
func PodSpecRefs(spec *corev1.PodSpec) []Ref {
	s := newRefSet()
	addPodSpecRefs(s, spec)
	return s.list()
}

func addPodSpecRefs(s *refSet, spec *corev1.PodSpec) {
	if spec == nil {
		return
	}
	for _, v := range spec.Volumes {
		from := "volume/" + v.Name
		if cm := v.ConfigMap; cm != nil {
			s.add(KindConfigMap, cm.Name, optional(cm.Optional), fromTemplate, from)
		}
		if sec := v.Secret; sec != nil {
			s.add(KindSecret, sec.SecretName, optional(sec.Optional), fromTemplate, from)
		}
		for _, name := range volumePluginSecrets(v.VolumeSource) {
			s.add(KindSecret, name, false, fromTemplate, from)
		}
		if p := v.Projected; p != nil {
			for _, src := range p.Sources {
				if cm := src.ConfigMap; cm != nil {
					s.add(KindConfigMap, cm.Name, optional(cm.Optional), fromTemplate, from)
				}
				if sec := src.Secret; sec != nil {
					s.add(KindSecret, sec.Name, optional(sec.Optional), fromTemplate, from)
				}
			}
		}
	}
	for _, ips := range spec.ImagePullSecrets {
		s.add(KindSecret, ips.Name, false, fromTemplate, "imagePullSecrets")
	}
	containers := func(kind string, cs []corev1.Container) {
		for _, c := range cs {
			addContainerRefs(s, kind, c.Name, c.EnvFrom, c.Env)
		}
	}
	containers("initContainer", spec.InitContainers)
	containers("container", spec.Containers)
	for _, c := range spec.EphemeralContainers {
		addContainerRefs(s, "ephemeralContainer", c.Name, c.EnvFrom, c.Env)
	}
}

// RefsOnly returns a copy of spec that keeps only what PodSpecRefs reads (volume
// sources that name a ConfigMap or Secret, env and envFrom references, container names,
// imagePullSecrets), for caches that hold many pod specs: PodSpecRefs(RefsOnly(s))
// equals PodSpecRefs(s).
func RefsOnly(spec *corev1.PodSpec) corev1.PodSpec {
	out := corev1.PodSpec{ImagePullSecrets: spec.ImagePullSecrets}
	for _, v := range spec.Volumes {
		if lv, ok := leanVolume(v); ok {
			out.Volumes = append(out.Volumes, lv)
		}
	}
	out.InitContainers = leanContainers(spec.InitContainers)
	out.Containers = leanContainers(spec.Containers)
	for _, c := range spec.EphemeralContainers {
		if env, envFrom := leanEnv(c.Env, c.EnvFrom); env != nil || envFrom != nil {
			out.EphemeralContainers = append(out.EphemeralContainers, corev1.EphemeralContainer{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: c.Name, Env: env, EnvFrom: envFrom}})
		}
	}
	return out
}

func leanVolume(v corev1.Volume) (corev1.Volume, bool) {
	src := v.VolumeSource
	out := corev1.Volume{Name: v.Name}
	switch {
	case src.ConfigMap != nil:
		out.ConfigMap = &corev1.ConfigMapVolumeSource{LocalObjectReference: src.ConfigMap.LocalObjectReference, Optional: src.ConfigMap.Optional}
	case src.Secret != nil:
		out.Secret = &corev1.SecretVolumeSource{SecretName: src.Secret.SecretName, Optional: src.Secret.Optional}
	case src.Projected != nil:
		p := &corev1.ProjectedVolumeSource{}
		for _, ps := range src.Projected.Sources {
			switch {
			case ps.ConfigMap != nil:
				p.Sources = append(p.Sources, corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{
					LocalObjectReference: ps.ConfigMap.LocalObjectReference, Optional: ps.ConfigMap.Optional}})
			case ps.Secret != nil:
				p.Sources = append(p.Sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
					LocalObjectReference: ps.Secret.LocalObjectReference, Optional: ps.Secret.Optional}})
			}
		}
		if len(p.Sources) == 0 {
			return out, false
		}
		out.Projected = p
	case len(volumePluginSecrets(src)) > 0:
		out.VolumeSource = src // rare: kept whole
	default:
		return out, false
	}
	return out, true
}

func leanContainers(cs []corev1.Container) []corev1.Container {
	var out []corev1.Container
	for _, c := range cs {
		if env, envFrom := leanEnv(c.Env, c.EnvFrom); env != nil || envFrom != nil {
			out = append(out, corev1.Container{Name: c.Name, Env: env, EnvFrom: envFrom})
		}
	}
	return out
}

func leanEnv(env []corev1.EnvVar, envFrom []corev1.EnvFromSource) ([]corev1.EnvVar, []corev1.EnvFromSource) {
	var outEnv []corev1.EnvVar
	for _, e := range env {
		if vf := e.ValueFrom; vf != nil && (vf.ConfigMapKeyRef != nil || vf.SecretKeyRef != nil) {
			outEnv = append(outEnv, corev1.EnvVar{Name: e.Name, ValueFrom: &corev1.EnvVarSource{
				ConfigMapKeyRef: vf.ConfigMapKeyRef, SecretKeyRef: vf.SecretKeyRef}})
		}
	}
	var outFrom []corev1.EnvFromSource
	for _, ef := range envFrom {
		if ef.ConfigMapRef != nil || ef.SecretRef != nil {
			outFrom = append(outFrom, corev1.EnvFromSource{ConfigMapRef: ef.ConfigMapRef, SecretRef: ef.SecretRef})
		}
	}
	return outEnv, outFrom
}

// volumePluginSecrets lists the Secrets volume plugins authenticate with.
func volumePluginSecrets(v corev1.VolumeSource) []string {
	var out []string
	ref := func(r *corev1.LocalObjectReference) {
		if r != nil {
			out = append(out, r.Name)
		}
	}
	if v.CSI != nil {
		ref(v.CSI.NodePublishSecretRef)
	}
	if v.AzureFile != nil {
		out = append(out, v.AzureFile.SecretName)
	}
	if v.CephFS != nil {
		ref(v.CephFS.SecretRef)
	}
	if v.RBD != nil {
		ref(v.RBD.SecretRef)
	}
	if v.ISCSI != nil {
		ref(v.ISCSI.SecretRef)
	}
	if v.FlexVolume != nil {
		ref(v.FlexVolume.SecretRef)
	}
	if v.ScaleIO != nil {
		ref(v.ScaleIO.SecretRef)
	}
	if v.StorageOS != nil {
		ref(v.StorageOS.SecretRef)
	}
	if v.Cinder != nil {
		ref(v.Cinder.SecretRef)
	}
	return out
}

func addContainerRefs(s *refSet, kind, name string, envFrom []corev1.EnvFromSource, env []corev1.EnvVar) {
	for _, ef := range envFrom {
		from := "envFrom/" + kind + "/" + name
		if r := ef.ConfigMapRef; r != nil {
			s.add(KindConfigMap, r.Name, optional(r.Optional), fromTemplate, from)
		}
		if r := ef.SecretRef; r != nil {
			s.add(KindSecret, r.Name, optional(r.Optional), fromTemplate, from)
		}
	}
	for _, e := range env {
		if e.ValueFrom == nil {
			continue
		}
		from := "env/" + kind + "/" + name + ":" + e.Name
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			s.add(KindConfigMap, r.Name, optional(r.Optional), fromTemplate, from)
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			s.add(KindSecret, r.Name, optional(r.Optional), fromTemplate, from)
		}
	}
}

// SortRefs orders refs by kind then name, for stable output.
func SortRefs(refs []Ref) {
	sort.Slice(refs, func(i, j int) bool {
		if refs[i].Kind != refs[j].Kind {
			return refs[i].Kind < refs[j].Kind
		}
		return refs[i].Name < refs[j].Name
	})
}
