// Package clusters holds the tests that run the whole service over several clusters:
// two local control planes ("a" and "b"), the service in-process (internal/server, or
// `configmap-attacher serve` through internal/cli) serving both through kubeconfig
// contexts and Argo CD cluster Secrets, and what a broken, hung, re-added or capped
// member cluster must not do to the others. The registry's own tests stay in
// internal/cluster.
package clusters
