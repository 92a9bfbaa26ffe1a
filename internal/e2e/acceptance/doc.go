// Package acceptance holds configmap-attacher's acceptance tests on real parts only: the
// local control plane with its workloads (kube-controller-manager's garbage collector,
// Deployment and ReplicaSet controllers, kube-scheduler, kwok making Pods Running and
// Ready, the Argo Rollouts controller), the kubectl-argo-rollouts plugin for promote,
// abort and undo, the real Argo Events processes, and the service in-process through
// internal/server. No test plays a controller's part: the tests only do what a user does
// (create ConfigMaps and Secrets, change a template, promote, abort, undo, delete a Pod)
// and poll for what the controllers and the service must make true.
package acceptance
