package cli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// MultiClusterFlags select several clusters for gc and status (package cluster).
// Without them the commands work on the one cluster of --kubeconfig/--context, as before.
type MultiClusterFlags struct {
	// Clusters are kubeconfig contexts (--cluster, repeated), or with --argocd-clusters
	// a subset of the clusters by name.
	Clusters []string
	// AllContexts selects every kubeconfig context.
	AllContexts bool
	// ArgoCDNamespace adds the clusters of the Argo CD cluster Secrets in that namespace.
	ArgoCDNamespace string
	// Parallel bounds how many clusters are worked on at once.
	Parallel int
	// ExecPlugins (--allow-exec-plugin) are the credential plugins Argo CD cluster
	// Secrets may run.
	ExecPlugins []string
}

func (m *MultiClusterFlags) addFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&m.Clusters, "cluster", m.Clusters, clusterFlagHelp)
	fs.BoolVar(&m.AllContexts, "all-contexts", m.AllContexts, "work on every context of the kubeconfig")
	fs.StringVar(&m.ArgoCDNamespace, "argocd-clusters", m.ArgoCDNamespace, argoCDFlagHelp)
	addExecPluginFlag(fs, &m.ExecPlugins)
	if m.Parallel == 0 {
		m.Parallel = cluster.DefaultParallel
	}
	fs.IntVar(&m.Parallel, "parallel", m.Parallel, "clusters worked on at once")
}

func (m *MultiClusterFlags) multi() bool {
	return len(m.Clusters) > 0 || m.AllContexts || m.ArgoCDNamespace != ""
}

func (m *MultiClusterFlags) validate() error {
	if m.Parallel == 0 {
		m.Parallel = cluster.DefaultParallel
	}
	if m.Parallel < 1 {
		return usagef("--parallel must be at least 1")
	}
	if len(m.Clusters) > 0 && m.AllContexts {
		return usagef("--cluster and --all-contexts are exclusive")
	}
	return nil
}

// target is one cluster a one-shot command works on.
type target struct {
	// name is "" for the single cluster of --kubeconfig/--context (outputs unchanged).
	name    string
	clients *kube.Clients
	// nss are the namespaces; nil means every namespace holding an opted-in revision.
	nss []string
}

func targetName(t target) string { return t.name }

// targets resolves the flags to the clusters to work on. With --argocd-clusters,
// --cluster selects among every cluster (home plus Argo CD); otherwise it selects
// kubeconfig contexts. Invalid Argo CD Secrets are logged and skipped.
func (c *ClusterFlags) targets(ctx context.Context, log *slog.Logger) ([]target, error) {
	if !c.multi() {
		clients, nss, err := c.connect(ctx)
		if err != nil {
			return nil, err
		}
		return []target{{clients: clients, nss: nss}}, nil
	}
	exec, err := execPolicy(c.ExecPlugins, 0)
	if err != nil {
		return nil, err
	}
	src := cluster.Sources{Kubeconfig: c.Kubeconfig, Context: c.Context, InCluster: c.InCluster,
		AllContexts: c.AllContexts, ArgoCDNamespace: c.ArgoCDNamespace, ExecPlugins: exec}
	var subset []string
	if c.ArgoCDNamespace != "" {
		subset = c.Clusters
	} else {
		src.Contexts = c.Clusters
	}
	specs, bad, err := src.All(ctx)
	if err != nil {
		return nil, err
	}
	for _, e := range bad {
		log.Warn("cluster skipped", "error", e)
	}
	if specs, err = cluster.Select(specs, subset); err != nil {
		return nil, usageError{err}
	}
	out := make([]target, 0, len(specs))
	for _, sp := range specs {
		clients, err := kube.NewClients(sp.Config)
		if err != nil {
			return nil, fmt.Errorf("cluster %s: %w", sp.Name, err)
		}
		t := target{name: sp.Name, clients: clients}
		switch {
		case c.AllNamespaces:
			t.nss = sp.Namespaces // nil: all
		case c.Namespace != "":
			t.nss = []string{c.Namespace}
		case sp.Source == cluster.SourceKubeconfig:
			ns, err := kube.ContextNamespace(kube.ConfigOptions{Kubeconfig: c.Kubeconfig, Context: sp.Name})
			if err != nil {
				return nil, fmt.Errorf("cluster %s: %w", sp.Name, err)
			}
			t.nss = []string{ns}
		case sp.Source == cluster.SourceHome:
			ns, err := kube.ContextNamespace(kube.ConfigOptions{Kubeconfig: c.Kubeconfig, Context: c.Context, InCluster: c.InCluster})
			if err != nil {
				return nil, fmt.Errorf("cluster %s: %w", sp.Name, err)
			}
			t.nss = []string{ns}
		default:
			t.nss = []string{"default"}
		}
		out = append(out, t)
	}
	return out, nil
}

// restConfig returns attach's client configuration: without --cluster the one of
// --kubeconfig/--context/--in-cluster; with --cluster the kubeconfig context of that
// name (which then also gives the default namespace), or with --argocd-clusters the
// cluster of that name among the home cluster and the Argo CD cluster Secrets.
func (o *AttachOptions) restConfig(ctx context.Context) (*rest.Config, error) {
	if o.Cluster == "" {
		return kube.RESTConfig(kube.ConfigOptions{Kubeconfig: o.Kubeconfig, Context: o.Context, InCluster: o.InCluster})
	}
	if o.ArgoCDNamespace == "" {
		specs, err := cluster.KubeconfigSpecs(o.Kubeconfig, []string{o.Cluster}, false, 0, 0)
		if err != nil {
			return nil, usageError{fmt.Errorf("--cluster: %w", err)}
		}
		if o.Context == "" {
			o.Context = o.Cluster // for the default namespace
		}
		return specs[0].Config, nil
	}
	exec, err := execPolicy(o.ExecPlugins, 0)
	if err != nil {
		return nil, err
	}
	specs, _, err := cluster.Sources{Kubeconfig: o.Kubeconfig, Context: o.Context, InCluster: o.InCluster,
		ArgoCDNamespace: o.ArgoCDNamespace, ExecPlugins: exec}.All(ctx)
	if err != nil {
		return nil, err
	}
	sel, err := cluster.Select(specs, []string{o.Cluster})
	if err != nil {
		return nil, usageError{err}
	}
	return sel[0].Config, nil
}

// The help of --cluster and --argocd-clusters, the same on every command.
const (
	clusterFlagHelp = "work on this cluster: a kubeconfig context, or with --argocd-clusters any registered cluster name; repeat for several"
	argoCDFlagHelp  = "also work on the clusters of the Argo CD cluster Secrets in this namespace"
)
