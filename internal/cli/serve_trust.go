package cli

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
)

// DefaultMaxClusters is serve --max-clusters' default: each served cluster keeps
// informer caches of its own, so a namespace full of cluster Secrets must not be able
// to exhaust the service's memory.
const DefaultMaxClusters = 50

// ClusterTrustFlags are serve's limits on what cluster Secrets can make it do: the
// credential plugins they may run, how many clusters it serves and how long one
// request to a cluster may take.
type ClusterTrustFlags struct {
	ExecPlugins    []string
	ExecTimeout    time.Duration
	MaxClusters    int
	RequestTimeout time.Duration
}

// DefaultClusterTrustFlags returns the defaults.
func DefaultClusterTrustFlags() ClusterTrustFlags {
	return ClusterTrustFlags{ExecTimeout: cluster.DefaultExecTimeout, MaxClusters: DefaultMaxClusters,
		RequestTimeout: cluster.DefaultRequestTimeout}
}

// AddFlags binds the flags.
func (f *ClusterTrustFlags) AddFlags(fs *pflag.FlagSet) {
	addExecPluginFlag(fs, &f.ExecPlugins)
	fs.DurationVar(&f.ExecTimeout, "exec-plugin-timeout", f.ExecTimeout, "bound of one credential plugin run, a cluster Secret's or a kubeconfig context's (it is killed, with its children, beyond); a failed plugin is retried after a growing backoff, never in a loop")
	fs.IntVar(&f.MaxClusters, "max-clusters", f.MaxClusters, "most clusters served, static ones included; Argo CD cluster Secrets beyond are refused (reason cluster-cap); 0: no cap")
	fs.DurationVar(&f.RequestTimeout, "cluster-request-timeout", f.RequestTimeout, "bound of every request to a served cluster but watches")
}

// Validate checks the flags and the plugin allow-list; errors are usage errors.
func (f *ClusterTrustFlags) Validate() error {
	switch {
	case f.ExecTimeout <= 0:
		return usagef("--exec-plugin-timeout must be positive")
	case f.MaxClusters < 0:
		return usagef("--max-clusters must not be negative")
	case f.RequestTimeout <= 0:
		return usagef("--cluster-request-timeout must be positive")
	}
	_, err := execPolicy(f.ExecPlugins, f.ExecTimeout)
	return err
}

// applyServer sets the credential plugins' bound of the one cluster of New's rest.Config.
func (f *ClusterTrustFlags) applyServer(so *server.Options) { so.ExecTimeout = f.ExecTimeout }

// apply sets the registry's limits, with the plugin allow-list built from the flags.
func (f *ClusterTrustFlags) apply(ro *cluster.Options) error {
	p, err := execPolicy(f.ExecPlugins, f.ExecTimeout)
	if err != nil {
		return err
	}
	ro.ExecPlugins, ro.ExecTimeout, ro.MaxClusters, ro.RequestTimeout = p, f.ExecTimeout, f.MaxClusters, f.RequestTimeout
	return nil
}
