package event

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

const rsJSON = `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-7d9","namespace":"shop","uid":"1f0c-uid","labels":{"rollouts-pod-template-hash":"7d9"}},"spec":{"template":{"spec":{"containers":[{"name":"app","image":"x"}]}}}}`

func eventData(body string, extra string) string {
	return `{"type":"ADD","body":` + body + `,"oldBody":null,"group":"apps","version":"v1","resource":"replicasets","metadata":{"cluster":"east"}` + extra + `}`
}

func quoted(s string) string { b, _ := json.Marshal(s); return string(b) }

func structured(data string, extra string) string {
	return `{"specversion":"1.0","id":"e1","source":"configmap-attacher","type":"resource","subject":"rollout-replicasets","datacontenttype":"application/json","cluster":"west","data":` + data + extra + `}`
}

func TestDecodeAccepts(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString([]byte(eventData(rsJSON, "")))
	for _, tc := range []struct {
		name       string
		in         string
		form       Form
		event, ext string
	}{
		{"bare object", rsJSON, FormObject, "", ""},
		{"event data, body object", eventData(rsJSON, ""), FormEventData, "east", ""},
		{"event data, body escaped string", eventData(quoted(rsJSON), ""), FormEventData, "east", ""},
		{"event data, metadata escaped", `{"type":"ADD","body":` + rsJSON + `,"metadata":` + quoted(`{"cluster":"east"}`) + `}`, FormEventData, "east", ""},
		{"event data, only body", `{"body":` + rsJSON + `}`, FormEventData, "", ""},
		{"event data, lower-case add", `{"type":"add","body":` + rsJSON + `}`, FormEventData, "", ""},
		{"event data, body without kind but resource named", `{"resource":"replicasets","body":{"metadata":{"name":"web-7d9","namespace":"shop","uid":"1f0c-uid"}}}`, FormEventData, "", ""},
		{"structured CloudEvent", structured(eventData(rsJSON, ""), ""), FormCloudEvent, "east", "west"},
		{"structured CloudEvent, data is a bare object", structured(rsJSON, ""), FormCloudEvent, "", "west"},
		{"structured CloudEvent, data escaped", structured(quoted(eventData(rsJSON, "")), ""), FormCloudEvent, "east", "west"},
		{"structured CloudEvent, data_base64", `{"specversion":"1.0","id":"e1","source":"s","type":"resource","datacontenttype":"application/json","data_base64":"` + b64 + `"}`, FormCloudEvent, "east", ""},
		{"whole payload escaped once", quoted(eventData(rsJSON, "")), FormEventData, "east", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Decode([]byte(tc.in))
			require.NoError(t, err)
			assert.Equal(t, "shop", d.Event.Namespace)
			assert.Equal(t, "web-7d9", d.Event.Name)
			assert.Equal(t, "1f0c-uid", string(d.Event.UID))
			assert.Equal(t, tc.form, d.Form)
			assert.Equal(t, tc.event, d.EventCluster)
			assert.Equal(t, tc.ext, d.ExtensionCluster)
			assert.Empty(t, d.Event.Cluster, "the caller chooses the cluster")
		})
	}
}

func TestDecodeEventBinaryMode(t *testing.T) {
	ev := cloudevents.New()
	ev.SetID("1")
	ev.SetSource("src")
	ev.SetType("resource")
	ev.SetExtension("cluster", "west")
	require.NoError(t, ev.SetData("application/json", json.RawMessage(eventData(rsJSON, ""))))
	d, err := DecodeEvent(ev)
	require.NoError(t, err)
	assert.Equal(t, "west", d.ExtensionCluster)
	assert.Equal(t, "east", d.EventCluster)
	assert.Equal(t, "east", d.Cluster(""))
	assert.Equal(t, "spec", d.Cluster("spec"))
	d.EventCluster = ""
	assert.Equal(t, "west", d.Cluster(""))
	d.ExtensionCluster = ""
	assert.Equal(t, "", d.Cluster(""))
}

func TestDecodeRejects(t *testing.T) {
	deep := strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1)
	deepInBody := `{"body":` + quoted(`{"kind":"ReplicaSet","x":`+strings.Repeat("[", MaxDepth+1)+strings.Repeat("]", MaxDepth+1)+`}`) + `}`
	big := `{"body":` + rsJSON + `,"pad":"` + strings.Repeat("x", MaxPayloadBytes) + `"}`
	for _, tc := range []struct {
		name, in, field string
		notAdd          bool
	}{
		{"empty", ``, "payload", false},
		{"not json", `hello`, "payload", false},
		{"array", `[1,2]`, "payload", false},
		{"number", `42`, "payload", false},
		{"invalid utf-8", "{\"body\":\"\xff\xfe\"}", "payload", false},
		{"too deep", deep, "payload", false},
		{"too deep inside escaped body", deepInBody, "body", false},
		{"too big", big, "payload", false},
		{"neither form", `{"hello":"world"}`, "body", false},
		{"wrong kind", strings.Replace(rsJSON, `"ReplicaSet"`, `"Deployment"`, 1), "kind", false},
		{"wrong apiVersion", strings.Replace(rsJSON, `"apps/v1"`, `"apps/v1beta2"`, 1), "apiVersion", false},
		{"bare object without kind", `{"apiVersion":"apps/v1","metadata":{"name":"a","namespace":"b"}}`, "kind", false},
		{"wrong resource", `{"resource":"deployments","body":` + rsJSON + `}`, "resource", false},
		{"wrong group", `{"group":"argoproj.io","body":` + rsJSON + `}`, "group", false},
		{"wrong body kind", `{"body":` + strings.Replace(rsJSON, `"ReplicaSet"`, `"ConfigMap"`, 1) + `}`, "body.kind", false},
		{"UPDATE", `{"type":"UPDATE","body":` + rsJSON + `}`, "type", true},
		{"DELETE", `{"type":"DELETE","body":` + rsJSON + `}`, "type", true},
		{"type not a string", `{"type":1,"body":` + rsJSON + `}`, "type", false},
		{"null body", `{"type":"ADD","body":null}`, "body", false},
		{"body a number", `{"body":5}`, "body", false},
		{"body escaped twice", `{"body":` + quoted(quoted(rsJSON)) + `}`, "body", false},
		{"missing name", `{"body":{"kind":"ReplicaSet","metadata":{"namespace":"shop"}}}`, "body.metadata.name", false},
		{"missing namespace", `{"body":{"kind":"ReplicaSet","metadata":{"name":"web"}}}`, "body.metadata.namespace", false},
		{"missing metadata", `{"body":{"kind":"ReplicaSet"}}`, "body.metadata", false},
		{"name not a string", `{"body":{"kind":"ReplicaSet","metadata":{"name":["x"],"namespace":"shop"}}}`, "body.metadata.name", false},
		{"bad name", `{"body":{"kind":"ReplicaSet","metadata":{"name":"../etc","namespace":"shop"}}}`, "body.metadata.name", false},
		{"bad namespace", `{"body":{"kind":"ReplicaSet","metadata":{"name":"web","namespace":"Shop!"}}}`, "body.metadata.namespace", false},
		{"uid too long", `{"body":{"kind":"ReplicaSet","metadata":{"name":"web","namespace":"shop","uid":"` + strings.Repeat("u", 200) + `"}}}`, "body.metadata.uid", false},
		{"cluster not a string", `{"metadata":{"cluster":7},"body":` + rsJSON + `}`, "metadata.cluster", false},
		{"cluster with control chars", `{"metadata":{"cluster":"a\nb"},"body":` + rsJSON + `}`, "metadata.cluster", false},
		{"CloudEvent missing id", `{"specversion":"1.0","source":"s","type":"t","data":` + rsJSON + `}`, "cloudevent", false},
		{"CloudEvent bad specversion", `{"specversion":"9.9","id":"1","source":"s","type":"t","data":` + rsJSON + `}`, "payload", false},
		{"CloudEvent without data", `{"specversion":"1.0","id":"1","source":"s","type":"t"}`, "data", false},
		{"CloudEvent xml data", `{"specversion":"1.0","id":"1","source":"s","type":"t","datacontenttype":"application/xml","data":"<a/>"}`, "datacontenttype", false},
		{"CloudEvent bad base64", `{"specversion":"1.0","id":"1","source":"s","type":"t","data_base64":"!!!"}`, "payload", false},
		{"CloudEvent cluster extension not a string", structured(rsJSON, "")[:len(structured(rsJSON, ""))-1] + `,"cluster":5}`, "cluster", false},
		{"CloudEvent v0.3 base64 one byte", `{"specversion":"0.3","id":"1","source":"s","type":"t","datacontentencoding":"base64","data":1}`, "payload", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.in))
			require.Error(t, err)
			assert.ErrorIs(t, err, core.ErrInvalid)
			var fe *core.FieldError
			require.True(t, errors.As(err, &fe), "want a *core.FieldError, got %T %v", err, err)
			if tc.field != "" {
				assert.Equal(t, tc.field, fe.Field, "error: %v", err)
			}
			assert.Equal(t, tc.notAdd, errors.Is(err, ErrNotAdd))
			assert.Less(t, len(err.Error()), 600, "errors must not echo large input")
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{rsJSON, eventData(rsJSON, ""), eventData(quoted(rsJSON), ""), structured(eventData(rsJSON, ""), ""),
		`{"type":"UPDATE","body":{}}`, `{"body":"{\"kind\":1}"}`, `[]`, `"x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Decode(data)
		if err != nil {
			if !errors.Is(err, core.ErrInvalid) {
				t.Fatalf("error does not wrap ErrInvalid: %v", err)
			}
			var fe *core.FieldError
			if !errors.As(err, &fe) || fe.Field == "" {
				t.Fatalf("error is not a *core.FieldError with a field: %v", err)
			}
			return
		}
		if err := d.Event.Validate(); err != nil {
			t.Fatalf("decoded an invalid event %+v: %v", d.Event, err)
		}
	})
}
