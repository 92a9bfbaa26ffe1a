package controlplane

import "k8s.io/client-go/rest"

// Site is where a component of the harness (Argo CD, Flux, External Secrets) runs beside
// a control plane: the options their Start functions share.
type Site struct {
	// Kubeconfig is an admin kubeconfig of the cluster (the component's KUBECONFIG or
	// --kubeconfig).
	Kubeconfig string
	// RESTConfig is the same cluster, for creating the component's own objects (CRDs,
	// namespace, settings).
	RESTConfig *rest.Config
	// BinDir holds the component's binaries.
	BinDir string
	// Dir is the working directory (logs, the component's data); it must exist and
	// outlive the component's Stop.
	Dir string
	// Root is the repository root (hack/tools pins the component's modules).
	Root string
	// Logf receives progress lines; nil means silent.
	Logf func(format string, args ...any)
}

// Site is cp's Site with working directory dir, repository root root and logf.
func (cp *ControlPlane) Site(dir, root string, logf func(format string, args ...any)) Site {
	return Site{Kubeconfig: cp.Kubeconfig(), RESTConfig: cp.RESTConfig(), BinDir: cp.BinDir(), Dir: dir, Root: root, Logf: logf}
}
