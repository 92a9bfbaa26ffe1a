package eventsource

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/event"
)

// Publisher publishes ReplicaSet events to an Argo Events EventBus (JetStream) exactly as
// the resource EventSource does: subject default.<eventSourceName>.<eventName>,
// Nats-Msg-Id = CloudEvent id.
type Publisher struct {
	JS              jetstream.JetStream
	EventSourceName string
	EventName       string
	// Metadata is the EventSource's metadata map (for example {"cluster": "east"}).
	Metadata map[string]string
}

// Subject is the subject events are published to.
func (p *Publisher) Subject() string {
	return fmt.Sprintf("default.%s.%s", p.EventSourceName, p.EventName)
}

// Publish publishes one event of type typ (ADD, UPDATE, DELETE) for rs and waits for the
// stream's acknowledgement. Errors come from JetStream (no stream, timeout, ...).
func (p *Publisher) Publish(ctx context.Context, typ string, rs *appsv1.ReplicaSet) error {
	id, body, err := event.ResourceEvent(p.EventSourceName, p.EventName, typ, rs, p.Metadata)
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: p.Subject(), Data: body, Header: nats.Header{}}
	msg.Header.Set(jetstream.MsgIDHeader, id)
	if _, err := p.JS.PublishMsg(ctx, msg); err != nil {
		return fmt.Errorf("publishing to %s: %w", p.Subject(), err)
	}
	return nil
}
