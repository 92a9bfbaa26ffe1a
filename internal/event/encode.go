package event

import (
	"encoding/json"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/google/uuid"
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
