// Package event is the ReplicaSet event as Argo Events' resource EventSource emits it:
// Decode turns an untrusted payload into the core's domain event, and ResourceEvent /
// Publisher write one (for the project's own stand-in event source). Every way in that
// takes payloads (gRPC custom trigger, HTTP receiver, EventBus subscription) uses the
// one decoder here, so every path accepts the same payloads and rejects the same
// hostile ones.
//
// Accepted forms (docs/design.md, "Payloads"):
//
//   - a CloudEvent in structured mode (JSON with specversion, data or data_base64) whose
//     data is one of the two forms below; a CloudEvent already decoded by the
//     CloudEvents SDK (HTTP binary mode) through DecodeEvent;
//   - Argo Events' resource event data: {"type", "body", "oldBody", "group", "version",
//     "resource", "metadata"}; body and metadata may be JSON objects or JSON strings
//     holding JSON (what Argo Events' dataKey parameters produce without useRawData);
//   - a bare apps/v1 ReplicaSet object.
//
// The shipped EventSource for Argo Events is eventsource/replicasets.eventsource.yaml.
package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"k8s.io/apimachinery/pkg/types"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// Limits bound what the decoder accepts from an untrusted payload.
const (
	// MaxPayloadBytes is the largest payload Decode accepts. A ReplicaSet is at most
	// about 1.5 MiB (the etcd object limit); escaped inside an Argo Events parameter it
	// can nearly double.
	MaxPayloadBytes = 3 << 20
	// MaxDepth is the deepest JSON nesting (objects and arrays) Decode accepts. Real
	// ReplicaSets nest about 15 levels.
	MaxDepth = 64
	// MaxClusterLen bounds a cluster name taken from an event.
	MaxClusterLen = 253
)

// The only resource the decoder accepts.
const (
	Group    = "apps"
	Version  = "v1"
	Resource = "replicasets"
	Kind     = "ReplicaSet"
	// TypeAdd is the Argo Events resource event type of a created object.
	TypeAdd = "ADD"
	// ClusterExtension is the CloudEvent extension attribute naming the cluster.
	ClusterExtension = "cluster"
)

// ErrNotAdd marks a well-formed event whose type is not ADD (UPDATE, DELETE). Callers
// usually acknowledge and ignore it rather than report an error; it also satisfies
// errors.Is(err, core.ErrInvalid) and errors.As(err, **core.FieldError) (field "type").
var ErrNotAdd = errors.New("not an ADD event")

// NotAddError is returned for an event of another type than ADD.
type NotAddError struct {
	// Type is the event's type, clipped.
	Type string
	fe   *core.FieldError
}

func (e *NotAddError) Error() string { return e.fe.Error() }

// Unwrap exposes both the *core.FieldError (ErrInvalid) and ErrNotAdd.
func (e *NotAddError) Unwrap() []error { return []error{e.fe, ErrNotAdd} }

// Form names the payload form that was decoded.
type Form string

// The payload forms.
const (
	FormCloudEvent Form = "cloudevent"
	FormEventData  Form = "event-data"
	FormObject     Form = "object"
)

// Decoded is a decoded payload.
type Decoded struct {
	// Event carries Namespace, Name and UID of the ReplicaSet from the payload. Cluster
	// and Options are left empty: the caller sets them (see Cluster).
	Event core.Event
	// EventCluster is the event data's metadata.cluster (set by the EventSource).
	EventCluster string
	// ExtensionCluster is the CloudEvent extension attribute "cluster".
	ExtensionCluster string
	// Type is the event type ("ADD"; empty when the payload had none, e.g. a bare object).
	Type string
	// Form is the outer form of the payload.
	Form Form
	// CloudEventID and CloudEventSource identify the CloudEvent, when there was one.
	CloudEventID, CloudEventSource string
}

// Cluster returns the cluster the event applies to, in the contract's order: the spec's
// cluster, the event's metadata.cluster, the CloudEvent extension, then "" (the
// default cluster).
func (d Decoded) Cluster(specCluster string) string {
	for _, c := range []string{specCluster, d.EventCluster, d.ExtensionCluster} {
		if c != "" {
			return c
		}
	}
	return ""
}

// CoreEvent returns the domain event with Cluster set to the cluster the event itself
// names (metadata.cluster, then the CloudEvent extension; "" for none). A spec's
// cluster, which wins over both, is applied by the dispatcher.
func (d Decoded) CoreEvent() core.Event {
	ev := d.Event
	ev.Cluster = d.Cluster("")
	return ev
}

// Decode decodes an untrusted payload in any accepted form. Errors are *core.FieldError
// (errors.Is(err, core.ErrInvalid)) naming the offending field ("payload" for the
// payload as a whole, "body.metadata.name", "type", ...); a non-ADD event is a
// *NotAddError (also ErrNotAdd). Decode never panics and reads at most
// MaxPayloadBytes.
func Decode(data []byte) (Decoded, error) {
	if err := checkRaw("payload", data); err != nil {
		return Decoded{}, err
	}
	top, err := objectOf("payload", data, true)
	if err != nil {
		return Decoded{}, err
	}
	if _, ok := top["specversion"]; ok {
		ev, err := unmarshalCloudEvent(data)
		if err != nil {
			return Decoded{}, err
		}
		return DecodeEvent(ev)
	}
	return decodeData(top)
}

// unmarshalCloudEvent parses a structured-mode CloudEvent with the SDK. The SDK's
// parser is not hardened against every malformed input, so a panic is turned into an
// error.
func unmarshalCloudEvent(data []byte) (ev cloudevents.Event, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = core.Invalidf("payload", "not a valid structured CloudEvent")
		}
	}()
	if err := json.Unmarshal(data, &ev); err != nil {
		return ev, core.Invalidf("payload", "not a valid structured CloudEvent: %s", core.Clip(core.OneLine(err.Error())))
	}
	return ev, nil
}

// DecodeEvent decodes a CloudEvent (from the SDK, e.g. HTTP binary mode) whose data is
// Argo Events' resource event data or a bare ReplicaSet. Errors as for Decode; a
// CloudEvent that fails the SDK's validation is a *core.FieldError for "cloudevent".
func DecodeEvent(ev cloudevents.Event) (Decoded, error) {
	if err := ev.Validate(); err != nil {
		return Decoded{}, core.Invalidf("cloudevent", "%s", core.Clip(core.OneLine(err.Error())))
	}
	if ct := ev.DataContentType(); ct != "" && !isJSONType(ct) {
		return Decoded{}, core.Invalidf("datacontenttype", "%q: the data must be JSON", core.Clip(ct))
	}
	var ext string
	if v, ok := ev.Extensions()[ClusterExtension]; ok {
		s, ok := v.(string)
		if !ok {
			return Decoded{}, core.Invalidf("cluster", "the CloudEvent extension must be a string")
		}
		if err := checkCluster("cluster", s); err != nil {
			return Decoded{}, err
		}
		ext = s
	}
	data := ev.Data()
	if len(bytes.TrimSpace(data)) == 0 {
		return Decoded{}, core.Invalidf("data", "the CloudEvent has no data")
	}
	if err := checkRaw("data", data); err != nil {
		return Decoded{}, err
	}
	top, err := objectOf("data", data, true)
	if err != nil {
		return Decoded{}, err
	}
	d, err := decodeData(top)
	if err != nil {
		return Decoded{}, err
	}
	d.Form = FormCloudEvent
	d.ExtensionCluster = ext
	d.CloudEventID, d.CloudEventSource = core.Clip(ev.ID()), core.Clip(ev.Source())
	return d, nil
}

// decodeData decodes Argo Events' resource event data or a bare ReplicaSet.
func decodeData(top map[string]json.RawMessage) (Decoded, error) {
	if body, ok := top["body"]; ok {
		return decodeEventData(top, body)
	}
	_, hasKind := top["kind"]
	_, hasAPIVersion := top["apiVersion"]
	if !hasKind && !hasAPIVersion {
		return Decoded{}, core.Invalidf("body", "the payload is neither a CloudEvent, Argo Events resource event data (with body), nor a ReplicaSet object (with kind)")
	}
	d := Decoded{Form: FormObject}
	ev, err := objectIdentity("", top, false)
	if err != nil {
		return Decoded{}, err
	}
	d.Event = ev
	return d, nil
}

func decodeEventData(top map[string]json.RawMessage, body json.RawMessage) (Decoded, error) {
	d := Decoded{Form: FormEventData}
	var err error
	if d.Type, err = optString(top, "type"); err != nil {
		return Decoded{}, err
	}
	group, err := optString(top, "group")
	if err != nil {
		return Decoded{}, err
	}
	version, err := optString(top, "version")
	if err != nil {
		return Decoded{}, err
	}
	resource, err := optString(top, "resource")
	if err != nil {
		return Decoded{}, err
	}
	switch {
	case group != "" && group != Group:
		return Decoded{}, core.Invalidf("group", "%q: only ReplicaSets (group %q) are accepted", core.Clip(group), Group)
	case version != "" && version != Version:
		return Decoded{}, core.Invalidf("version", "%q: only ReplicaSets (version %q) are accepted", core.Clip(version), Version)
	case resource != "" && resource != Resource:
		return Decoded{}, core.Invalidf("resource", "%q: only %q are accepted", core.Clip(resource), Resource)
	}
	if raw, ok := top["metadata"]; ok && !isNull(raw) {
		meta, err := objectOf("metadata", raw, true)
		if err != nil {
			return Decoded{}, err
		}
		if c, err := optString(meta, "cluster"); err != nil {
			return Decoded{}, core.Invalidf("metadata.cluster", "must be a string")
		} else if err := checkCluster("metadata.cluster", c); err != nil {
			return Decoded{}, err
		} else {
			d.EventCluster = c
		}
	}
	if d.Type != "" && !strings.EqualFold(d.Type, TypeAdd) {
		t := core.Clip(d.Type)
		return Decoded{}, &NotAddError{Type: t, fe: &core.FieldError{Field: "type", Msg: fmt.Sprintf("%q: only %s events are handled", t, TypeAdd)}}
	}
	if isNull(body) {
		return Decoded{}, core.Invalidf("body", "is null")
	}
	obj, err := objectOf("body", body, true)
	if err != nil {
		return Decoded{}, err
	}
	ev, err := objectIdentity("body.", obj, resource == Resource)
	if err != nil {
		return Decoded{}, err
	}
	d.Event = ev
	return d, nil
}

// objectIdentity reads kind, apiVersion and metadata.{namespace,name,uid} of a
// Kubernetes object. kindOptional allows a missing kind when the envelope already named
// the resource.
func objectIdentity(prefix string, obj map[string]json.RawMessage, kindOptional bool) (core.Event, error) {
	kind, err := optString(obj, "kind")
	if err != nil {
		return core.Event{}, prefixed(prefix, err)
	}
	apiVersion, err := optString(obj, "apiVersion")
	if err != nil {
		return core.Event{}, prefixed(prefix, err)
	}
	switch {
	case kind == "" && !kindOptional:
		return core.Event{}, core.Invalidf(prefix+"kind", "is required (want %q)", Kind)
	case kind != "" && kind != Kind:
		return core.Event{}, core.Invalidf(prefix+"kind", "%q: only %s objects are accepted", core.Clip(kind), Kind)
	case apiVersion != "" && apiVersion != Group+"/"+Version:
		return core.Event{}, core.Invalidf(prefix+"apiVersion", "%q: only %s/%s is accepted", core.Clip(apiVersion), Group, Version)
	}
	rawMeta, ok := obj["metadata"]
	if !ok || isNull(rawMeta) {
		return core.Event{}, core.Invalidf(prefix+"metadata", "is required")
	}
	meta, err := objectOf(prefix+"metadata", rawMeta, false)
	if err != nil {
		return core.Event{}, err
	}
	var ev core.Event
	if ev.Namespace, err = optString(meta, "namespace"); err != nil {
		return core.Event{}, prefixed(prefix+"metadata.", err)
	}
	if ev.Name, err = optString(meta, "name"); err != nil {
		return core.Event{}, prefixed(prefix+"metadata.", err)
	}
	uid, err := optString(meta, "uid")
	if err != nil {
		return core.Event{}, prefixed(prefix+"metadata.", err)
	}
	ev.UID = types.UID(uid)
	if err := ev.Validate(); err != nil {
		return core.Event{}, prefixed(prefix+"metadata.", err)
	}
	return ev, nil
}

// prefixed rewrites a *core.FieldError's field as prefix+field.
func prefixed(prefix string, err error) error {
	var fe *core.FieldError
	if errors.As(err, &fe) {
		return &core.FieldError{Field: prefix + fe.Field, Msg: fe.Msg}
	}
	return err
}

// objectOf parses raw as a JSON object. When allowString is set, a JSON string holding
// a JSON object (an escaped document, as Argo Events parameters produce) is accepted
// too, one level deep.
func objectOf(field string, raw json.RawMessage, allowString bool) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if allowString && len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, core.Invalidf(field, "not a valid JSON string: %s", core.Clip(err.Error()))
		}
		inner := []byte(s)
		if err := checkRaw(field, inner); err != nil {
			return nil, err
		}
		return objectOf(field, inner, false)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, core.Invalidf(field, "must be a JSON object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, core.Invalidf(field, "not valid JSON: %s", core.Clip(err.Error()))
	}
	return m, nil
}

// optString returns m[key] as a string; missing or null is "".
func optString(m map[string]json.RawMessage, key string) (string, error) {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", core.Invalidf(key, "must be a string")
	}
	return s, nil
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

func checkCluster(field, c string) error {
	if len(c) > MaxClusterLen {
		return core.Invalidf(field, "is %d characters long, at most %d are allowed", len(c), MaxClusterLen)
	}
	for _, r := range c {
		if r < 0x21 || r > 0x7e {
			return core.Invalidf(field, "%q contains characters other than printable ASCII", core.Clip(c))
		}
	}
	return nil
}

// checkRaw applies the size, UTF-8 and nesting limits to untrusted JSON text.
func checkRaw(field string, data []byte) error {
	if len(data) > MaxPayloadBytes {
		return core.Invalidf(field, "is %d bytes, at most %d are accepted", len(data), MaxPayloadBytes)
	}
	if !utf8.Valid(data) {
		return core.Invalidf(field, "is not valid UTF-8")
	}
	if d := maxDepth(data); d > MaxDepth {
		return core.Invalidf(field, "nests deeper than %d levels", MaxDepth)
	}
	return nil
}

// maxDepth returns the deepest nesting of JSON objects and arrays in data, outside
// strings. It stops counting once MaxDepth is exceeded.
func maxDepth(data []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > MaxDepth {
					return deepest
				}
			}
		case '}', ']':
			depth--
		}
	}
	return deepest
}

// IsJSONContentType reports whether a media type carries JSON: application/json,
// text/json, or any +json suffix, with or without parameters.
func IsJSONContentType(ct string) bool { return isJSONType(ct) }

func isJSONType(ct string) bool {
	mt := strings.ToLower(strings.TrimSpace(strings.SplitN(ct, ";", 2)[0]))
	return mt == "application/json" || mt == "text/json" || strings.HasSuffix(mt, "+json")
}
