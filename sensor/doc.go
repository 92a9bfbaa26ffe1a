// Package sensor holds what replaces or feeds an Argo Events Sensor for
// configmap-attacher:
//
//   - the Sensor manifests users deploy (grpc-trigger.sensor.yaml for the custom
//     trigger, http-trigger.sensor.yaml for Argo Events' HTTP trigger), and
//   - Subscriber, a direct subscription to the Argo Events EventBus (NATS JetStream):
//     a durable pull consumer on the stream the EventSources publish to, so the service
//     can act on ReplicaSet ADD events without any Sensor.
package sensor
