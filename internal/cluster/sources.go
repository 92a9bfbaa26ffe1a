package cluster

import (
	"context"
	"errors"

	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// Sources select the clusters a command works on; the serve, gc, status and attach
// flags map onto it.
type Sources struct {
	// Kubeconfig, Context and InCluster select the home cluster as kube.ConfigOptions
	// does; HomeName names it (events' metadata.cluster, default "in-cluster").
	Kubeconfig, Context string
	InCluster           bool
	HomeName            string
	// Contexts (--cluster, repeated) or AllContexts (--all-contexts) select kubeconfig
	// contexts instead of the home cluster; each cluster is named after its context.
	Contexts    []string
	AllContexts bool
	// ArgoCDNamespace (--argocd-clusters) adds the clusters of the Argo CD cluster
	// Secrets in that namespace of the default cluster.
	ArgoCDNamespace string
	// ExecPlugins are the credential plugins Argo CD cluster Secrets may name
	// (--allow-exec-plugin); nil allows none.
	ExecPlugins *ExecPolicy
	// QPS and Burst are the client rate limits (kube.ConfigOptions).
	QPS   float32
	Burst int
}

// Multi reports whether s asks for anything but the single home cluster.
func (s Sources) Multi() bool {
	return len(s.Contexts) > 0 || s.AllContexts || s.ArgoCDNamespace != ""
}

// Validate checks that the selections are consistent.
func (s Sources) Validate() error {
	if len(s.Contexts) > 0 && s.AllContexts {
		return errors.New("--cluster and --all-contexts are exclusive")
	}
	for _, c := range s.Contexts {
		if err := ValidateName(c); err != nil {
			return err
		}
	}
	return nil
}

// Static returns the clusters known without asking any cluster: the kubeconfig
// contexts selected, else the home cluster. The first is the default.
func (s Sources) Static() ([]Spec, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if len(s.Contexts) > 0 || s.AllContexts {
		return KubeconfigSpecs(s.Kubeconfig, s.Contexts, s.AllContexts, s.QPS, s.Burst)
	}
	name := s.HomeName
	if name == "" {
		name = "in-cluster"
	}
	home, err := HomeSpec(name, kube.ConfigOptions{Kubeconfig: s.Kubeconfig, Context: s.Context, InCluster: s.InCluster,
		QPS: s.QPS, Burst: s.Burst})
	if err != nil {
		return nil, err
	}
	return []Spec{home}, nil
}

// All returns Static plus, with ArgoCDNamespace, the clusters of the Argo CD cluster
// Secrets listed once from the first (default) cluster, for one-shot commands. Invalid
// Secrets are returned as errors beside the Specs; an Argo CD cluster whose name is
// already taken is skipped with an error; a Secret naming the home cluster (Argo CD's
// in-cluster Secret, homeCluster.isAlias) is skipped: the home is served already, and
// another Secret claiming its name is an error, as in serve (argoCDSpecs).
func (s Sources) All(ctx context.Context) ([]Spec, []error, error) {
	specs, err := s.Static()
	if err != nil {
		return nil, nil, err
	}
	if s.ArgoCDNamespace == "" {
		return specs, nil, nil
	}
	clients, err := kube.NewClients(specs[0].Config)
	if err != nil {
		return nil, nil, err
	}
	argo, bad, err := argoCDSpecs(ctx, clients.Kube, s.ArgoCDNamespace, s.ExecPlugins, homeClusterOf(specs))
	if err != nil {
		return nil, nil, err
	}
	taken := map[string]string{}
	for _, sp := range specs {
		taken[sp.Name] = sp.Origin
	}
	for _, sp := range argo {
		if o, dup := taken[sp.Name]; dup {
			bad = append(bad, errors.New(sp.Origin+": cluster name "+sp.Name+" is already registered by "+o))
			continue
		}
		taken[sp.Name] = sp.Origin
		specs = append(specs, sp)
	}
	return specs, bad, nil
}
