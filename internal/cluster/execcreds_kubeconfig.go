package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// execPlugin is a cluster's credential plugin as data: what execCreds runs, and the
// client configuration (without credentials) its tokens are added to. A Spec keeps it;
// every registration starts a runner of its own (Spec.withCredentials).
type execPlugin struct {
	path, apiVersion string
	args, env        []string
	timeout          time.Duration
	// cluster is KUBERNETES_EXEC_INFO's spec.cluster (a kubeconfig's
	// provideClusterInfo); nil: none.
	cluster json.RawMessage
	// base is the configuration the runner's tokens are added to.
	base *rest.Config
}

// start returns a new runner of p: its own token, backoff and life.
func (p *execPlugin) start() *execCreds {
	c := newExecCreds(p.path, p.apiVersion, p.args, p.env, p.timeout)
	c.cluster = p.cluster
	return c
}

// kubeconfigPlugin takes cfg's kubeconfig exec plugin (cfg.ExecProvider) over from
// client-go, which runs it without a deadline: the same runner as a cluster Secret's
// allowed plugin then runs it, each run bounded by timeout (DefaultExecTimeout when
// zero) and killed with its children beyond, failures backed off. A kubeconfig is the
// operator's, so its command is not checked against the allow-list; it is run
// non-interactively, with the kubeconfig's env and, with provideClusterInfo, the
// cluster's details. Only tokens are supported (a plugin returning a client
// certificate fails every request with a clear error).
func kubeconfigPlugin(cfg *rest.Config, timeout time.Duration) (*execPlugin, error) {
	ep := cfg.ExecProvider
	if ep.Command == "" {
		return nil, errors.New("kubeconfig exec plugin: command is empty")
	}
	if ep.APIVersion != "client.authentication.k8s.io/v1beta1" && ep.APIVersion != "client.authentication.k8s.io/v1" {
		return nil, fmt.Errorf("kubeconfig exec plugin %s: apiVersion %q is not client.authentication.k8s.io/v1 or v1beta1",
			ep.Command, core.Clip(ep.APIVersion))
	}
	if timeout <= 0 {
		timeout = DefaultExecTimeout
	}
	p := &execPlugin{path: ep.Command, apiVersion: ep.APIVersion, args: ep.Args, timeout: timeout}
	for _, e := range ep.Env {
		p.env = append(p.env, e.Name+"="+e.Value)
	}
	if ep.ProvideClusterInfo {
		info, err := execClusterInfo(cfg)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig exec plugin %s: %w", ep.Command, err)
		}
		p.cluster = info
	}
	p.base = rest.CopyConfig(cfg)
	p.base.ExecProvider = nil
	return p, nil
}

// execClusterInfo is cfg's cluster as KUBERNETES_EXEC_INFO's spec.cluster (the same
// JSON in client.authentication.k8s.io/v1 and v1beta1).
func execClusterInfo(cfg *rest.Config) (json.RawMessage, error) {
	c, err := rest.ConfigToExecCluster(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster info: %w", err)
	}
	v1 := clientauthv1.Cluster{Server: c.Server, TLSServerName: c.TLSServerName, InsecureSkipTLSVerify: c.InsecureSkipTLSVerify,
		CertificateAuthorityData: c.CertificateAuthorityData, ProxyURL: c.ProxyURL, DisableCompression: c.DisableCompression}
	if c.Config != nil {
		raw, err := json.Marshal(c.Config)
		if err != nil {
			return nil, fmt.Errorf("cluster info: extension config: %w", err)
		}
		v1.Config = runtime.RawExtension{Raw: raw}
	}
	b, err := json.Marshal(v1)
	if err != nil {
		return nil, fmt.Errorf("cluster info: %w", err)
	}
	return b, nil
}
