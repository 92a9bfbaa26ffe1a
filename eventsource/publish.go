package eventsource

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	appsv1 "k8s.io/api/apps/v1"
)

// ArgoResourceEventType is the CloudEvent type Argo Events' resource EventSource emits.
const ArgoResourceEventType = "resource"

// ResourceEvent returns the structured-mode CloudEvent JSON that Argo Events' resource
// EventSource publishes for a ReplicaSet event (pkg/eventsources/sources/resource and
// pkg/eventsources/eventing.go in github.com/argoproj/argo-events): source = EventSource
// name, subject = event name, type "resource", data = ResourceEventData
// {type, body, oldBody, group, version, resource, metadata}. typ is ADD, UPDATE or DELETE.
// It returns the CloudEvent id too (the JetStream de-duplication key).
func ResourceEvent(eventSourceName, eventName, typ string, rs *appsv1.ReplicaSet, metadata map[string]string) (id string, body []byte, err error) {
	obj := rs.DeepCopy()
	obj.APIVersion, obj.Kind = "apps/v1", "ReplicaSet"
	objBody, err := json.Marshal(obj)
	if err != nil {
		return "", nil, fmt.Errorf("marshalling ReplicaSet: %w", err)
	}
	var oldBody []byte
	data := &ResourceEventData{
		EventType: typ,
		Body:      (*json.RawMessage)(&objBody),
		OldBody:   (*json.RawMessage)(&oldBody),
		Group:     "apps",
		Version:   "v1",
		Resource:  "replicasets",
		Metadata:  metadata,
	}
	dataJSON, err := json.Marshal(data)
	if err != nil {
		return "", nil, err
	}
	u := uuid.New()
	ev := cloudevents.NewEvent()
	ev.SetID(fmt.Sprintf("%x", u[:]))
	ev.SetType(ArgoResourceEventType)
	ev.SetSource(eventSourceName)
	ev.SetSubject(eventName)
	ev.SetTime(time.Now())
	if err := ev.SetData(cloudevents.ApplicationJSON, dataJSON); err != nil {
		return "", nil, err
	}
	body, err = json.Marshal(ev)
	return ev.ID(), body, err
}

// ResourceEventData is the data of a resource EventSource's CloudEvent, field for field
// as github.com/argoproj/argo-events pkg/eventsources/events.ResourceEventData (v1.9).
// It is declared here because that package imports every event source's SDK.
type ResourceEventData struct {
	EventType string            `json:"type"`
	Body      *json.RawMessage  `json:"body"`
	OldBody   *json.RawMessage  `json:"oldBody"`
	Group     string            `json:"group"`
	Version   string            `json:"version"`
	Resource  string            `json:"resource"`
	Metadata  map[string]string `json:"metadata,omitempty"`
}

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
	id, body, err := ResourceEvent(p.EventSourceName, p.EventName, typ, rs, p.Metadata)
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
