// Package eventsource is the ReplicaSet event source: replicasets.eventsource.yaml, the
// Argo Events resource EventSource users deploy (apps/v1 ReplicaSets, ADD, with
// metadata.cluster), and Source, the project's stand-in for it where Argo Events'
// EventSource is not installed (`configmap-attacher eventsource`): it publishes the
// same events, in the same format (package event), to the same EventBus subject.
package eventsource
