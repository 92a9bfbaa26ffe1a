package cli

import (
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/configmap-attacher/configmap-attacher/internal/cluster"
)

// The help of --allow-exec-plugin, the same on every command that reads Argo CD
// cluster Secrets.
const execPluginFlagHelp = "credential plugin an Argo CD cluster Secret's execProviderConfig may run: an absolute path, or a bare name resolved once through this process's $PATH; repeat for several. Default none: such Secrets are refused and nothing is run (docs/safety.md)"

func addExecPluginFlag(fs *pflag.FlagSet, v *[]string) {
	fs.StringArrayVar(v, "allow-exec-plugin", *v, execPluginFlagHelp)
}

// execPolicy builds the allow-list of --allow-exec-plugin; this program's own
// executable is refused.
func execPolicy(entries []string, timeout time.Duration) (*cluster.ExecPolicy, error) {
	self, _ := os.Executable()
	p, err := cluster.NewExecPolicy(entries, timeout, self)
	if err != nil {
		return nil, usagef("--allow-exec-plugin: %v", err)
	}
	return p, nil
}

// inCredentialPlugin reports whether this process was started as a Kubernetes
// credential plugin: client-go and the service set KUBERNETES_EXEC_INFO for every
// plugin they run. A trusted listing (attach --configmaps/--secrets) is then refused:
// it counts only from a person's command line, never from a process a cluster Secret
// (or a kubeconfig) started.
func inCredentialPlugin() bool { return os.Getenv(cluster.ExecInfoEnv) != "" }

// execInfoEnv is cluster.ExecInfoEnv, for messages.
const execInfoEnv = cluster.ExecInfoEnv
