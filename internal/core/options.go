package core

import (
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Operation is what an event asks the core to do.
type Operation string

// Operations accepted in the trigger spec key "operation".
const (
	OperationAttach Operation = "attach"
	OperationGC     Operation = "gc"
)

// Spec keys of the custom trigger (docs/design.md, "Trigger spec"). The Sensor sends
// the trigger spec as Argo Events' map[string]string.
const (
	SpecOperation      = "operation"
	SpecConfigMaps     = "configMaps"
	SpecSecrets        = "secrets"
	SpecDiscover       = "discover"
	SpecSelector       = "selector"
	SpecIncludeSecrets = "includeSecrets"
	SpecCluster        = "cluster"
	SpecNamespace      = "namespace"
	SpecDryRun         = "dryRun"
)

var specKeys = []string{SpecOperation, SpecConfigMaps, SpecSecrets, SpecDiscover, SpecSelector,
	SpecIncludeSecrets, SpecCluster, SpecNamespace, SpecDryRun}

// MaxListedNames bounds the comma lists in a spec or annotation.
const MaxListedNames = 256

// Options are the per-event settings, parsed from a trigger spec or from CLI flags.
type Options struct {
	// Operation is attach (default) or gc.
	Operation Operation
	// ConfigMaps and Secrets are names added to discovery. Names that come with an event
	// are untrusted: such an object needs the opt-in label (and the selector) unless the
	// ReplicaSet's pod template references it (safety rule 4, docs/safety.md).
	ConfigMaps []string
	Secrets    []string
	// TrustListedNames makes ConfigMaps and Secrets trusted: listed objects need no
	// opt-in label, as the old Job's -configmaps list. Only Go callers set it, for a
	// one-shot command whose list comes from its own command line and which runs with
	// the user's own credentials; no trigger spec key, query parameter or header does.
	TrustListedNames bool
	// Discover (default true) adds the ConfigMaps/Secrets the pod template references.
	Discover bool
	// Selector is the label selector a discovered object must match (default
	// DefaultSelector). It narrows the opt-in, never widens it: a discovered object must
	// carry the opt-in label whatever the selector (docs/design.md, safety rule 4). Explicitly
	// listed objects need neither.
	Selector labels.Selector
	// IncludeSecrets (default false) lets the event attach Secrets.
	IncludeSecrets bool
	// Cluster names the target cluster; empty means "from the event, else default".
	Cluster string
	// Namespace, when set, is the only namespace the event may act in.
	Namespace string
	// DryRun reports what would be written and writes nothing.
	DryRun bool
}

// DefaultOptions returns the options of an empty spec.
func DefaultOptions() Options {
	sel, _ := labels.Parse(DefaultSelector)
	return Options{Operation: OperationAttach, Discover: true, Selector: sel}
}

// ParseSpec validates a custom trigger spec and returns its options. Every key is
// optional; an unknown key or a bad value is a *FieldError (ErrInvalid) naming the key.
// Keys and their defaults are listed in docs/design.md, "Trigger spec".
func ParseSpec(spec map[string]string) (Options, error) {
	return ParseSpecWith(DefaultOptions(), spec)
}

// ParseSpecWith is ParseSpec starting from base instead of DefaultOptions: a service
// whose defaults differ (Secrets allowed) gives every path the same meaning of an
// empty spec.
func ParseSpecWith(base Options, spec map[string]string) (Options, error) {
	o := base
	// Report problems in a stable order: the first bad key alphabetically.
	keys := make([]string, 0, len(spec))
	for k := range spec {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := strings.TrimSpace(spec[k])
		var err error
		switch k {
		case SpecOperation:
			switch Operation(v) {
			case "", OperationAttach:
				o.Operation = OperationAttach
			case OperationGC:
				o.Operation = OperationGC
			default:
				err = Invalidf(k, "must be %q or %q, got %q", OperationAttach, OperationGC, Clip(v))
			}
		case SpecConfigMaps:
			o.ConfigMaps, err = ParseNameList(k, v)
		case SpecSecrets:
			o.Secrets, err = ParseNameList(k, v)
		case SpecDiscover:
			o.Discover, err = parseBool(k, v, base.Discover)
		case SpecIncludeSecrets:
			o.IncludeSecrets, err = parseBool(k, v, base.IncludeSecrets)
		case SpecDryRun:
			o.DryRun, err = parseBool(k, v, base.DryRun)
		case SpecSelector:
			if v == "" {
				break
			}
			var sel labels.Selector
			sel, err = labels.Parse(v)
			if err != nil {
				err = Invalidf(k, "not a label selector: %v", err)
			} else {
				o.Selector = sel
			}
		case SpecCluster:
			if v != "" {
				if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
					err = Invalidf(k, "%q is not a valid cluster name: %s", Clip(v), strings.Join(errs, "; "))
				}
			}
			o.Cluster = v
		case SpecNamespace:
			if v != "" {
				if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
					err = Invalidf(k, "%q is not a valid namespace: %s", Clip(v), strings.Join(errs, "; "))
				}
			}
			o.Namespace = v
		case "":
			err = Invalidf("spec", "has an empty key (known keys: %s)", strings.Join(specKeys, ", "))
		default:
			err = Invalidf(Clip(k), "unknown spec key (known keys: %s)", strings.Join(specKeys, ", "))
		}
		if err != nil {
			return Options{}, err
		}
	}
	return o, nil
}

// Spec returns the normalised spec: every key with its effective value, as the
// map[string]string the Sensor applies its parameters to. ParseSpec(o.Spec()) == o.
func (o Options) Spec() map[string]string {
	sel := DefaultSelector
	if o.Selector != nil {
		sel = o.Selector.String()
	}
	op := o.Operation
	if op == "" {
		op = OperationAttach
	}
	return map[string]string{
		SpecOperation:      string(op),
		SpecConfigMaps:     strings.Join(o.ConfigMaps, ","),
		SpecSecrets:        strings.Join(o.Secrets, ","),
		SpecDiscover:       strconv.FormatBool(o.Discover),
		SpecSelector:       sel,
		SpecIncludeSecrets: strconv.FormatBool(o.IncludeSecrets),
		SpecCluster:        o.Cluster,
		SpecNamespace:      o.Namespace,
		SpecDryRun:         strconv.FormatBool(o.DryRun),
	}
}

// ParseNameList parses a comma list of object names ("a, b,,c"). Each name must be a
// valid object name (DNS-1123 subdomain, at most 253 characters); a "namespace/name"
// form is refused as a cross-namespace reference (safety rule 4). Duplicates are
// dropped, order kept. field names the input in errors.
func ParseNameList(field, v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) > MaxListedNames {
		return nil, Invalidf(field, "lists %d names, at most %d are allowed", len(parts), MaxListedNames)
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range parts {
		name := strings.TrimSpace(p)
		if name == "" || seen[name] {
			continue
		}
		if err := ValidateName(name); err != nil {
			return nil, Invalidf(field, "%v", err)
		}
		seen[name] = true
		out = append(out, name)
	}
	return out, nil
}

// ValidateName checks that name is a valid ConfigMap/Secret name in the same namespace:
// a DNS-1123 subdomain of at most 253 characters, without a namespace prefix.
func ValidateName(name string) error {
	if strings.Contains(name, "/") {
		return &RefusedError{Reason: "cross-namespace reference " + strconv.Quote(Clip(name)) + ": only names in the ReplicaSet's own namespace are allowed"}
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return &FieldError{Field: "name", Msg: strconv.Quote(Clip(name)) + " is not a valid object name: " + strings.Join(errs, "; ")}
	}
	return nil
}

func parseBool(field, v string, def bool) (bool, error) {
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, Invalidf(field, "must be true or false, got %q", Clip(v))
	}
	return b, nil
}

// Clip shortens untrusted text to at most 80 bytes (plus "…") before it is echoed in an
// error or log, without cutting a UTF-8 sequence in half.
func Clip(s string) string { return ClipTo(s, 80) }

// ClipTo is Clip to at most max bytes (plus "…").
func ClipTo(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// OneLine collapses every run of white space (newlines included) into one space, so that
// an error becomes one log or output line.
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
