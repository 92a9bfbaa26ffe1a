package cli

import (
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/trigger"
)

// SecurityFlags are serve's authentication, mutual TLS and namespace-policy flags.
type SecurityFlags struct {
	// HTTPTokenFile holds the bearer token the HTTP receiver requires.
	HTTPTokenFile string
	// PublicMetrics serves /metrics without the token.
	PublicMetrics bool
	// TLSClientCAFile requires client certificates signed by this CA (mutual TLS).
	TLSClientCAFile string
	// Namespaces and ExcludeNamespaces are the namespace allow and deny lists.
	Namespaces, ExcludeNamespaces []string
	// ExcludeSet: --exclude-namespaces was given (even empty); otherwise the deny list
	// is core.DefaultExcludedNamespaces of the service's own namespace.
	ExcludeSet bool
}

// AddFlags binds the flags.
func (f *SecurityFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.HTTPTokenFile, "http-token-file", f.HTTPTokenFile, "file holding a bearer token every HTTP event must carry (Authorization: Bearer <token>); the ops listener asks it for /metrics, /readyz's detail and pprof")
	fs.BoolVar(&f.PublicMetrics, "http-public-metrics", f.PublicMetrics, "with --http-token-file: serve /metrics without the token")
	fs.StringVar(&f.TLSClientCAFile, "tls-client-ca-file", f.TLSClientCAFile, "PEM CA bundle: require client certificates signed by it on gRPC and HTTP (mutual TLS; needs --tls-cert-file)")
	fs.StringSliceVar(&f.Namespaces, "namespaces", f.Namespaces, "act only in these namespaces (comma list; default: all); events elsewhere are refused")
	fs.StringSliceVar(&f.ExcludeNamespaces, "exclude-namespaces", f.ExcludeNamespaces, "never act in these namespaces (comma list); wins over --namespaces. Default: kube-system, kube-public, kube-node-lease and the service's own namespace ($POD_NAMESPACE); --exclude-namespaces= acts everywhere")
}

// Validate checks the flags; errors are usage errors.
func (f *SecurityFlags) Validate(tls bool) error {
	if f.TLSClientCAFile != "" && !tls {
		return usagef("--tls-client-ca-file needs --tls-cert-file and --tls-key-file")
	}
	if f.PublicMetrics && f.HTTPTokenFile == "" {
		return usagef("--http-public-metrics only makes sense with --http-token-file")
	}
	if _, err := core.ParseNamespacePolicy(f.Namespaces, f.ExcludeNamespaces); err != nil {
		return usageError{err}
	}
	return nil
}

// Apply loads the token file and sets the security options of so. Errors name the file,
// never the token.
func (f *SecurityFlags) Apply(so *server.Options) error {
	deny := f.ExcludeNamespaces
	if !f.ExcludeSet {
		own := ownNamespace()
		if own == so.Namespace || slices.Contains(f.Namespaces, own) {
			own = "" // a namespaced install serves its own namespace: asked for, not excluded
		}
		deny = core.DefaultExcludedNamespaces(own)
	}
	p, err := core.ParseNamespacePolicy(f.Namespaces, deny)
	if err != nil {
		return usageError{err}
	}
	so.Namespaces = p
	so.TLSClientCAFile = f.TLSClientCAFile
	so.PublicMetrics = f.PublicMetrics
	if f.HTTPTokenFile != "" {
		tok, err := trigger.LoadToken(f.HTTPTokenFile)
		if err != nil {
			return err
		}
		so.HTTPToken = tok
	}
	return nil
}

// serviceAccountNamespace is where a pod's service account token says it runs.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ownNamespace is the namespace the service runs in: $POD_NAMESPACE (the chart sets
// it), else the pod's service account namespace, else "" (not in a pod).
func ownNamespace() string {
	if ns := strings.TrimSpace(os.Getenv("POD_NAMESPACE")); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}
