package trigger

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"sigs.k8s.io/yaml"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// MaxSpecBytes bounds a trigger spec document (YAML or JSON).
const MaxSpecBytes = 64 << 10

// SpecParser turns a spec map into options; dispatch.Dispatcher.ParseSpec is one (it
// starts from the service's defaults), core.ParseSpec another.
type SpecParser func(map[string]string) (core.Options, error)

// ParseSpec parses a trigger spec document, YAML or JSON (the Sensor sends YAML to
// FetchResource and the JSON returned by it, after parameters, to Execute), and
// validates it with parse. Non-string scalars (true, 3) are taken as their text. Errors
// are *core.FieldError: "spec" for the document as a whole, the key otherwise.
func ParseSpec(doc []byte, parse SpecParser) (core.Options, error) {
	m, err := specMap(doc)
	if err != nil {
		return core.Options{}, err
	}
	return parse(m)
}

func specMap(doc []byte) (map[string]string, error) {
	if len(doc) > MaxSpecBytes {
		return nil, core.Invalidf("spec", "is %d bytes, at most %d are accepted", len(doc), MaxSpecBytes)
	}
	if !utf8.Valid(doc) {
		return nil, core.Invalidf("spec", "is not valid UTF-8")
	}
	if strings.TrimSpace(string(doc)) == "" {
		return map[string]string{}, nil
	}
	if multiDocument.Match(bytes.TrimPrefix(bytes.TrimLeft(doc, " \t\r\n"), []byte("---"))) {
		return nil, core.Invalidf("spec", "holds more than one YAML document; send one map")
	}
	js, err := yamlToJSON(doc)
	if err != nil {
		if m := duplicateKey.FindStringSubmatch(err.Error()); m != nil {
			if m[1] == "" {
				return nil, core.Invalidf("spec", "has an empty key, given more than once")
			}
			return nil, core.Invalidf(core.Clip(m[1]), "is given more than once")
		}
		return nil, core.Invalidf("spec", "not a YAML or JSON map: %s", core.Clip(core.OneLine(err.Error())))
	}
	var raw any
	dec := json.NewDecoder(strings.NewReader(string(js)))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, core.Invalidf("spec", "not a YAML or JSON map: %s", core.Clip(err.Error()))
	}
	if raw == nil {
		return map[string]string{}, nil
	}
	obj, ok := raw.(map[string]any)
	if !ok {
		return nil, core.Invalidf("spec", "must be a map of keys to strings, got %T", raw)
	}
	out := make(map[string]string, len(obj))
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys) // report the first bad key in a stable order
	for _, k := range keys {
		switch v := obj[k].(type) {
		case nil:
			out[k] = ""
		case string:
			out[k] = v
		case bool:
			out[k] = strconv.FormatBool(v)
		case json.Number:
			out[k] = v.String()
		default:
			return nil, core.Invalidf(core.Clip(k), "must be a string, got a %s", kindOf(v))
		}
	}
	return out, nil
}

// yamlToJSON converts YAML (or JSON) to JSON; the YAML parser's own panics on
// malformed input become errors.
func yamlToJSON(doc []byte) (js []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed document")
		}
	}()
	// Strict: a key given twice ("dryRun: true" then "dryRun: false") is an error, not
	// "last one wins".
	return yaml.YAMLToJSONStrict(doc)
}

// duplicateKey finds the key the strict YAML parser reports as given twice.
var duplicateKey = regexp.MustCompile(`key "([^"]*)" already set in map`)

// multiDocument finds a YAML document separator after the first document.
var multiDocument = regexp.MustCompile(`(?m)^(---|\.\.\.)(\s|$)`)

func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "map"
	case []any:
		return "list"
	}
	return fmt.Sprintf("%T", v)
}

// NormalizedSpec returns the normalised spec of o as JSON: every key with its effective
// value. It is FetchResource's answer.
func NormalizedSpec(o core.Options) ([]byte, error) {
	b, err := json.Marshal(o.Spec())
	if err != nil {
		return nil, fmt.Errorf("encoding the spec: %w", err)
	}
	return b, nil
}
