package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/kube"
)

// Where a cluster's configuration came from (Spec.Source).
const (
	// SourceHome is the cluster the service runs in: the in-cluster service account,
	// or the kubeconfig's current (or --context) context.
	SourceHome = "home"
	// SourceKubeconfig is a kubeconfig context selected with --cluster or --all-contexts.
	SourceKubeconfig = "kubeconfig"
	// SourceArgoCD is an Argo CD declarative cluster Secret.
	SourceArgoCD = "argocd"
)

// Argo CD's declarative cluster Secret format
// (https://argo-cd.readthedocs.io/en/stable/operator-manual/declarative-setup/#clusters).
const (
	// ArgoCDSecretTypeLabel marks Argo CD's credential Secrets; value ArgoCDSecretTypeCluster.
	ArgoCDSecretTypeLabel = "argocd.argoproj.io/secret-type"
	// ArgoCDSecretTypeCluster is ArgoCDSecretTypeLabel's value on cluster Secrets.
	ArgoCDSecretTypeCluster = "cluster"
	// ArgoCDInClusterServer is the server URL Argo CD uses for the cluster it runs in.
	ArgoCDInClusterServer = "https://kubernetes.default.svc"
)

// Spec says how to reach one cluster. Specs are pure data: building one contacts no
// server.
type Spec struct {
	// Name is the cluster name events carry (EventSource metadata.cluster).
	Name string
	// Source is SourceHome, SourceKubeconfig or SourceArgoCD; Origin names the context
	// or the Secret (namespace/name) it came from.
	Source, Origin string
	// Config is the client configuration (not shared with other Specs).
	Config *rest.Config
	// Namespaces limits the caches and sweeps to these namespaces; empty means all.
	Namespaces []string
	// exec is the cluster's credential plugin (nil without one): an allowed
	// execProviderConfig, or a kubeconfig context's exec plugin taken over from
	// client-go. It is pure data; withCredentials binds a run of it to a registration.
	exec *execPlugin
	// creds runs exec for Config's requests (nil without a plugin); the registry binds
	// its life to the cluster's registration.
	creds *execCreds
}

// closeCredentials kills the credential plugin's run in progress, if any, and makes
// later requests fail: the cluster is no longer served.
func (s Spec) closeCredentials() {
	if s.creds != nil {
		s.creds.Close()
	}
}

// withCredentials returns s with credentials of its own: a copy of Config whose
// requests carry the token of a new runner of s's credential plugin, or s itself
// without a plugin. Every registration of a cluster calls it, so that closing one
// registration's credentials (its Secret refused, changed or removed) never closes
// those of the next registration built from the same Spec. A kubeconfig context's exec
// plugin (Config.ExecProvider, which client-go would run without a deadline) is first
// taken over by the same runner, bounded by execTimeout (docs/safety.md).
func (s Spec) withCredentials(execTimeout time.Duration) (Spec, error) {
	if s.exec == nil && s.Config != nil && s.Config.ExecProvider != nil {
		p, err := kubeconfigPlugin(s.Config, execTimeout)
		if err != nil {
			return Spec{}, fmt.Errorf("cluster %q (%s): %w", s.Name, s.Origin, err)
		}
		s.exec = p
	}
	if s.exec == nil {
		return s, nil
	}
	s.creds = s.exec.start()
	s.Config = rest.CopyConfig(s.exec.base)
	s.Config.Wrap(s.creds.wrap)
	return s, nil
}

// Server returns the cluster's API server URL.
func (s Spec) Server() string {
	if s.Config == nil {
		return ""
	}
	return s.Config.Host
}

// ValidateName checks a cluster name: non-empty, at most 253 characters, no whitespace
// or control characters (it appears in metric labels, logs and event metadata).
func ValidateName(name string) error {
	switch {
	case name == "":
		return errors.New("cluster name is empty")
	case len(name) > validation.DNS1123SubdomainMaxLength:
		return fmt.Errorf("cluster name is %d characters long, at most %d are allowed", len(name), validation.DNS1123SubdomainMaxLength)
	case strings.IndexFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0:
		return fmt.Errorf("cluster name %q contains whitespace or control characters", core.Clip(name))
	}
	return nil
}

// HomeSpec returns the Spec of the cluster the service runs in, named name: the
// configuration kube.RESTConfig selects from o (in-cluster service account, or the
// kubeconfig's context).
func HomeSpec(name string, o kube.ConfigOptions) (Spec, error) {
	if err := ValidateName(name); err != nil {
		return Spec{}, err
	}
	cfg, err := kube.RESTConfig(o)
	if err != nil {
		return Spec{}, err
	}
	origin := "in-cluster"
	if !o.InCluster {
		origin = "kubeconfig"
		if o.Context != "" {
			origin = "kubeconfig context " + o.Context
		}
	}
	return Spec{Name: name, Source: SourceHome, Origin: origin, Config: cfg}, nil
}

// KubeconfigSpecs returns one Spec per kubeconfig context, each named after its
// context: the contexts listed, or every context of the kubeconfig (sorted) when all is
// set. kubeconfig empty means $KUBECONFIG, then ~/.kube/config. qps and burst are as
// in kube.ConfigOptions. An unknown context is an error naming it.
func KubeconfigSpecs(kubeconfig string, contexts []string, all bool, qps float32, burst int) ([]Spec, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	raw, err := rules.Load()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	names := contexts
	if all {
		names = make([]string, 0, len(raw.Contexts))
		for n := range raw.Contexts {
			names = append(names, n)
		}
		sort.Strings(names)
		if len(names) == 0 {
			return nil, errors.New("--all-contexts: the kubeconfig has no contexts")
		}
	}
	seen := map[string]bool{}
	specs := make([]Spec, 0, len(names))
	for _, n := range names {
		if seen[n] {
			continue
		}
		seen[n] = true
		if err := ValidateName(n); err != nil {
			return nil, fmt.Errorf("kubeconfig context: %w", err)
		}
		if _, ok := raw.Contexts[n]; !ok {
			return nil, fmt.Errorf("kubeconfig context %q not found (contexts: %s)", core.Clip(n), strings.Join(sortedKeys(raw.Contexts), ", "))
		}
		cfg, err := kube.RESTConfig(kube.ConfigOptions{Kubeconfig: kubeconfig, Context: n, QPS: qps, Burst: burst})
		if err != nil {
			return nil, fmt.Errorf("kubeconfig context %q: %w", n, err)
		}
		specs = append(specs, Spec{Name: n, Source: SourceKubeconfig, Origin: "kubeconfig context " + n, Config: cfg})
	}
	return specs, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// argoClusterConfig is the JSON document of an Argo CD cluster Secret's "config" key
// (Argo CD's v1alpha1.ClusterConfig). []byte fields are base64 in JSON, as Argo CD
// writes them.
type argoClusterConfig struct {
	Username           string              `json:"username,omitempty"`
	Password           string              `json:"password,omitempty"`
	BearerToken        string              `json:"bearerToken,omitempty"`
	TLSClientConfig    argoTLSClientConfig `json:"tlsClientConfig"`
	AWSAuthConfig      *argoAWSAuthConfig  `json:"awsAuthConfig,omitempty"`
	ExecProviderConfig *argoExecProvider   `json:"execProviderConfig,omitempty"`
	DisableCompression bool                `json:"disableCompression,omitempty"`
	ProxyURL           string              `json:"proxyUrl,omitempty"`
}

type argoTLSClientConfig struct {
	Insecure   bool   `json:"insecure"`
	ServerName string `json:"serverName,omitempty"`
	CertData   []byte `json:"certData,omitempty"`
	KeyData    []byte `json:"keyData,omitempty"`
	CAData     []byte `json:"caData,omitempty"`
}

type argoExecProvider struct {
	Command     string            `json:"command,omitempty"`
	Args        []string          `json:"args,omitempty"`
	Env         map[string]string `json:"env,omitempty"`
	APIVersion  string            `json:"apiVersion,omitempty"`
	InstallHint string            `json:"installHint,omitempty"`
}

// IsArgoCDClusterSecret reports whether s carries Argo CD's cluster Secret label.
func IsArgoCDClusterSecret(s *corev1.Secret) bool {
	return s != nil && s.Labels[ArgoCDSecretTypeLabel] == ArgoCDSecretTypeCluster
}

// SpecFromSecret converts an Argo CD declarative cluster Secret to a Spec. Data keys:
// "server" (required), "name" (default: the server URL, as in Argo CD), "config" (JSON:
// bearerToken, username/password, tlsClientConfig {insecure, serverName, caData,
// certData, keyData}, execProviderConfig {command, args, env, apiVersion, installHint},
// proxyUrl, disableCompression, awsAuthConfig {clusterName, roleARN, profile}) and
// "namespaces" (comma list). The in-cluster server https://kubernetes.default.svc
// without credentials means the pod's service account. awsAuthConfig is, as in Argo CD,
// the credential plugin argocd-k8s-auth (awsauth.go). Errors name the Secret and key.
// No credential plugin is allowed (see SpecFromSecretAllowing).
func SpecFromSecret(s *corev1.Secret) (Spec, error) { return SpecFromSecretAllowing(s, nil) }

// SpecFromSecretAllowing is SpecFromSecret with the operator's allow-list of credential
// plugins: an execProviderConfig whose command is not on it is an error wrapping
// ErrExecNotAllowed, and nothing is run. An allowed plugin runs only when a request
// needs a token, under the policy's deadline (see execCreds).
func SpecFromSecretAllowing(s *corev1.Secret, exec *ExecPolicy) (Spec, error) {
	sp, err := specFromSecret(s, exec)
	if err != nil {
		return Spec{}, err
	}
	return sp.withCredentials(0)
}

// specFromSecret is SpecFromSecretAllowing without credentials bound: the registry's
// claims keep it, and every registration binds its own (withCredentials).
func specFromSecret(s *corev1.Secret, exec *ExecPolicy) (Spec, error) {
	if s == nil {
		return Spec{}, errors.New("nil Secret")
	}
	key := s.Namespace + "/" + s.Name
	fail := func(format string, args ...any) (Spec, error) {
		return Spec{}, fmt.Errorf("Argo CD cluster Secret %s: "+format, append([]any{key}, args...)...)
	}
	if !IsArgoCDClusterSecret(s) {
		return fail("missing label %s=%s", ArgoCDSecretTypeLabel, ArgoCDSecretTypeCluster)
	}
	server := strings.TrimSpace(secretValue(s, "server"))
	if server == "" {
		return fail(`data key "server" is required`)
	}
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fail(`"server" %q is not an http(s) URL`, core.Clip(server))
	}
	name := strings.TrimSpace(secretValue(s, "name"))
	if name == "" {
		name = server
	}
	if err := ValidateName(name); err != nil {
		return fail(`"name": %v`, err)
	}
	var cc argoClusterConfig
	if raw := secretValue(s, "config"); strings.TrimSpace(raw) != "" {
		dec := json.NewDecoder(strings.NewReader(raw))
		if err := dec.Decode(&cc); err != nil {
			return fail(`"config" is not valid cluster config JSON: %v`, err)
		}
	}
	nss, err := secretNamespaces(s)
	if err != nil {
		return fail("%w", err)
	}

	hasCreds := cc.BearerToken != "" || cc.Username != "" || len(cc.TLSClientConfig.CertData) > 0 || cc.ExecProviderConfig != nil || cc.AWSAuthConfig != nil
	var cfg *rest.Config
	var plugin *execPlugin
	if strings.TrimSuffix(server, "/") == ArgoCDInClusterServer && !hasCreds {
		if cfg, err = rest.InClusterConfig(); err != nil {
			return fail("in-cluster server %s: %v", ArgoCDInClusterServer, err)
		}
	} else if cfg, plugin, err = secretConfig(server, cc, exec); err != nil {
		return fail("%w", err)
	}
	cfg.UserAgent = kube.UserAgent
	cfg.QPS, cfg.Burst = 50, 100
	if plugin != nil {
		plugin.base = cfg
	}
	return Spec{Name: name, Source: SourceArgoCD, Origin: "Argo CD Secret " + key, Config: cfg, Namespaces: nss, exec: plugin}, nil
}

// secretConfig is the client configuration of a Secret's "config" for server, and its
// allowed credential plugin (nil without one).
func secretConfig(server string, cc argoClusterConfig, exec *ExecPolicy) (*rest.Config, *execPlugin, error) {
	cfg := &rest.Config{
		Host:        server,
		BearerToken: cc.BearerToken,
		Username:    cc.Username,
		Password:    cc.Password,
		TLSClientConfig: rest.TLSClientConfig{
			Insecure:   cc.TLSClientConfig.Insecure,
			ServerName: cc.TLSClientConfig.ServerName,
			CAData:     cc.TLSClientConfig.CAData,
			CertData:   cc.TLSClientConfig.CertData,
			KeyData:    cc.TLSClientConfig.KeyData,
		},
		DisableCompression: cc.DisableCompression,
	}
	if (len(cc.TLSClientConfig.CertData) > 0) != (len(cc.TLSClientConfig.KeyData) > 0) {
		return nil, nil, errors.New(`"config".tlsClientConfig: certData and keyData go together`)
	}
	field, e, err := execProvider(cc)
	if err != nil {
		return nil, nil, err
	}
	var plugin *execPlugin
	if e != nil {
		if plugin, err = allowedPlugin(field, e, exec); err != nil {
			return nil, nil, err
		}
		cfg.BearerToken, cfg.BearerTokenFile, cfg.Username, cfg.Password = "", "", "", ""
	}
	if err := applyProxy(cfg, cc.ProxyURL); err != nil {
		return nil, nil, err
	}
	return cfg, plugin, nil
}

// applyProxy sets cfg's proxy to proxyURL ("" leaves it unset).
func applyProxy(cfg *rest.Config, proxyURL string) error {
	if proxyURL == "" {
		return nil
	}
	pu, err := url.Parse(proxyURL)
	if err != nil || pu.Host == "" {
		return fmt.Errorf(`"config".proxyUrl %q is not a URL`, core.Clip(proxyURL))
	}
	cfg.Proxy = http.ProxyURL(pu)
	return nil
}

// allowedPlugin checks the Secret's execProviderConfig against the allow-list and
// returns the plugin to run (by execCreds, not by client-go) for the cluster's
// requests; the caller sets its base configuration. Errors wrap ErrExecNotAllowed for
// a command or environment not allowed.
// field names the Secret's key the plugin comes from, for errors.
func allowedPlugin(field string, e *argoExecProvider, p *ExecPolicy) (*execPlugin, error) {
	if e.Command == "" {
		return nil, fmt.Errorf(`%s.command is required`, field)
	}
	path, err := p.resolve(e.Command)
	if err != nil {
		return nil, fmt.Errorf(`%s: %w`, field, err)
	}
	api := e.APIVersion
	if api == "" {
		api = "client.authentication.k8s.io/v1beta1"
	}
	if api != "client.authentication.k8s.io/v1beta1" && api != "client.authentication.k8s.io/v1" {
		return nil, fmt.Errorf(`%s.apiVersion %q is not client.authentication.k8s.io/v1 or v1beta1`, field, core.Clip(api))
	}
	var env []string
	for _, k := range sortedKeys(e.Env) {
		if unsafePluginEnv(k) || k == "" || strings.ContainsRune(k, '=') {
			return nil, fmt.Errorf(`%s.env: %w: %q may not be set by a cluster Secret`, field, ErrExecNotAllowed, core.Clip(k))
		}
		env = append(env, k+"="+e.Env[k])
	}
	return &execPlugin{path: path, apiVersion: api, args: e.Args, env: env, timeout: p.timeout()}, nil
}

// secretNamespaces parses the Secret's "namespaces" (comma list; empty: all). A
// namespace written twice is one (one cache and one sweep each).
func secretNamespaces(s *corev1.Secret) ([]string, error) {
	var nss []string
	seen := map[string]bool{}
	for _, ns := range strings.Split(secretValue(s, "namespaces"), ",") {
		if ns = strings.TrimSpace(ns); ns == "" || seen[ns] {
			continue
		}
		seen[ns] = true
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf(`"namespaces": %q is not a namespace name`, core.Clip(ns))
		}
		if len(nss) == MaxSecretNamespaces {
			return nil, fmt.Errorf(`"namespaces": more than %d namespaces (each is a cache of its own): list at most %d, or leave it empty to serve every namespace the service's RBAC on that cluster allows`,
				MaxSecretNamespaces, MaxSecretNamespaces)
		}
		nss = append(nss, ns)
	}
	return nss, nil
}

// MaxSecretNamespaces bounds a cluster Secret's "namespaces": each namespace is a cache
// (informers and watches) of its own in the process every cluster shares, so a Secret
// cannot make thousands of them (docs/safety.md, "Cluster Secrets are a trust boundary").
const MaxSecretNamespaces = 100

// secretValue returns data[key], else stringData[key] (set by clients before the
// apiserver merges it; present in unit tests and dry runs).
func secretValue(s *corev1.Secret, key string) string {
	if v, ok := s.Data[key]; ok {
		return string(v)
	}
	return s.StringData[key]
}

// fingerprint identifies the content of an Argo CD cluster Secret that matters here,
// so that a resync or an unrelated change (labels, annotations) restarts nothing.
func fingerprint(s *corev1.Secret) string {
	h := sha256.New()
	for _, k := range []string{"name", "server", "config", "namespaces"} {
		v := secretValue(s, k)
		fmt.Fprintf(h, "%s=%d:%s;", k, len(v), v)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ArgoCDSpecs lists the Argo CD cluster Secrets in namespace ns once (for one-shot
// commands; the Registry watches them instead), with the credential plugins exec
// allows (nil: none). It returns the valid Specs and one error per invalid Secret; the
// error is a listing failure.
func ArgoCDSpecs(ctx context.Context, client kubernetes.Interface, ns string, exec *ExecPolicy) ([]Spec, []error, error) {
	return argoCDSpecs(ctx, client, ns, exec, homeCluster{})
}

// argoCDSpecs is ArgoCDSpecs skipping the Secrets that name the home cluster
// (homeCluster.isAlias): the static clusters serve it already.
func argoCDSpecs(ctx context.Context, client kubernetes.Interface, ns string, exec *ExecPolicy, home homeCluster) ([]Spec, []error, error) {
	list, err := client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: ArgoCDSecretTypeLabel + "=" + ArgoCDSecretTypeCluster})
	if err != nil {
		return nil, nil, fmt.Errorf("listing Argo CD cluster Secrets in %s: %w", ns, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	aliases := map[string][]string{} // alias name (not the home's: taken anyway) -> its Secrets
	for i := range list.Items {
		s := &list.Items[i]
		if name := strings.TrimSpace(secretValue(s, "name")); name != home.name && home.isAlias(name, strings.TrimSpace(secretValue(s, "server"))) {
			aliases[name] = append(aliases[name], s.Namespace+"/"+s.Name)
		}
	}
	var specs []Spec
	var bad []error
	for i := range list.Items {
		s := &list.Items[i]
		if home.isAlias(strings.TrimSpace(secretValue(s, "name")), strings.TrimSpace(secretValue(s, "server"))) {
			continue
		}
		sp, err := SpecFromSecretAllowing(s, exec)
		if err == nil && len(aliases[sp.Name]) > 0 { // as serve decides (Registry.aliasConflict): neither is served
			err = fmt.Errorf("Argo CD cluster Secret %s/%s: cluster name %q (the home cluster) is also claimed by Secret %s: neither is served until one is deleted or renamed",
				s.Namespace, s.Name, sp.Name, strings.Join(aliases[sp.Name], ", "))
			sp.closeCredentials()
		}
		if err != nil {
			bad = append(bad, err)
			continue
		}
		specs = append(specs, sp)
	}
	return specs, bad, nil
}
