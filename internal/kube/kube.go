// Package kube builds Kubernetes clients for one cluster from a kubeconfig, a context
// or the in-cluster service account, and counts the API requests they make.
package kube

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// UserAgent identifies this program's requests in apiserver logs and metrics.
const UserAgent = "configmap-attacher"

// ConfigOptions selects how to reach a cluster.
type ConfigOptions struct {
	// Kubeconfig is a kubeconfig file path; empty means $KUBECONFIG, then ~/.kube/config.
	Kubeconfig string
	// Context is a kubeconfig context; empty means the current context.
	Context string
	// InCluster forces the in-cluster service-account configuration.
	InCluster bool
	// QPS and Burst bound client-side request rates; zero means 50 and 100.
	QPS   float32
	Burst int
}

// RESTConfig returns the client configuration ConfigOptions select. Without an explicit
// kubeconfig or context, the in-cluster configuration is tried when running in a pod.
func RESTConfig(o ConfigOptions) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if o.InCluster {
		cfg, err = rest.InClusterConfig()
	} else {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		if o.Kubeconfig != "" {
			rules.ExplicitPath = o.Kubeconfig
		}
		overrides := &clientcmd.ConfigOverrides{CurrentContext: o.Context}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
		if err != nil && o.Kubeconfig == "" && o.Context == "" {
			if ic, icErr := rest.InClusterConfig(); icErr == nil {
				cfg, err = ic, nil
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("loading Kubernetes client configuration: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 50, 100
	if o.QPS > 0 {
		cfg.QPS = o.QPS
	}
	if o.Burst > 0 {
		cfg.Burst = o.Burst
	}
	cfg.UserAgent = UserAgent
	return cfg, nil
}

// Clients bundles the clients the core needs for one cluster.
type Clients struct {
	Config   *rest.Config
	Kube     kubernetes.Interface
	Dynamic  dynamic.Interface
	Metadata metadata.Interface
	// Clock is the apiserver's clock as these clients' answers show it.
	Clock *ServerClock
}

// NewClients builds typed, dynamic and metadata clients sharing cfg. The typed client
// speaks protobuf unless cfg chooses a content type: the apiserver encodes each GET and
// PATCH answer (a ReplicaSet with its pod template, a ConfigMap with its data) at a
// fraction of JSON's cost, which a burst of attaches pays once per object.
func NewClients(cfg *rest.Config) (*Clients, error) {
	clock := NewServerClock(nil)
	cfg = clock.Wrap(cfg)
	tc := cfg
	if cfg.ContentType == "" {
		tc = rest.CopyConfig(cfg)
		tc.ContentType = "application/vnd.kubernetes.protobuf"
		tc.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	}
	kc, err := kubernetes.NewForConfig(tc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	mc, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	return &Clients{Config: cfg, Kube: kc, Dynamic: dc, Metadata: mc, Clock: clock}, nil
}

// RequestCounter counts the HTTP requests made through configs it wraps, by verb
// (GET, LIST/WATCH as GET with query, PATCH, ...). Tests use it to prove "no write".
type RequestCounter struct {
	mu     sync.Mutex
	byVerb map[string]int
	lists  int
	total  atomic.Int64
}

// Wrap makes cfg count its requests in c. It returns a copy; cfg is not modified.
func (c *RequestCounter) Wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	prev := out.WrapTransport
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			verb := req.Method
			if verb == http.MethodGet && strings.Contains(req.URL.RawQuery, "watch=true") {
				verb = "WATCH"
			}
			c.mu.Lock()
			if c.byVerb == nil {
				c.byVerb = map[string]int{}
			}
			c.byVerb[verb]++
			if verb == http.MethodGet && isCollection(req.URL.Path) {
				c.lists++
			}
			c.mu.Unlock()
			c.total.Add(1)
			return rt.RoundTrip(req)
		})
	}
	return out
}

// Count returns the number of requests with the given HTTP method ("WATCH" for watches).
func (c *RequestCounter) Count(verb string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byVerb[verb]
}

// Lists returns how many of the GETs read a collection (a LIST, not a GET of one
// object or a discovery read).
func (c *RequestCounter) Lists() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lists
}

// isCollection reports whether an API path names a collection: /api/v1/R,
// /api/v1/namespaces/NS/R, /apis/G/V/R or /apis/G/V/namespaces/NS/R.
func isCollection(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		return len(parts) == 3
	}
	return len(parts) == 1
}

// Writes returns the number of POST, PUT, PATCH and DELETE requests.
func (c *RequestCounter) Writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byVerb[http.MethodPost] + c.byVerb[http.MethodPut] + c.byVerb[http.MethodPatch] + c.byVerb[http.MethodDelete]
}

// Reset zeroes the counts.
func (c *RequestCounter) Reset() {
	c.mu.Lock()
	c.byVerb = nil
	c.lists = 0
	c.mu.Unlock()
	c.total.Store(0)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// ContextNamespace returns the namespace of the selected kubeconfig context, the
// service account's namespace in a pod, or "default".
func ContextNamespace(o ConfigOptions) (string, error) {
	if o.InCluster {
		if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
			return strings.TrimSpace(string(b)), nil
		}
		return "default", nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.Kubeconfig != "" {
		rules.ExplicitPath = o.Kubeconfig
	}
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context}).Namespace()
	if err != nil {
		return "", fmt.Errorf("reading the kubeconfig namespace: %w", err)
	}
	return ns, nil
}
