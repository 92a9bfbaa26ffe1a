package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// The one vocabulary of the one-shot commands (docs/cli.md): the same flag means the
// same on every command.

// Output formats of -o/--output.
const (
	OutputText = "text"
	OutputWide = "wide"
	OutputJSON = "json"
	OutputYAML = "yaml"
	OutputName = "name"
)

// validOutput checks -o against the formats a command offers ("table" is text, as gc
// called it first).
func validOutput(o *string, allowed ...string) error {
	if *o == "table" || *o == "" {
		*o = OutputText
	}
	for _, a := range allowed {
		if *o == a {
			return nil
		}
	}
	return usagef("--output %q: want %s", *o, orList(allowed))
}

func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// addOutputFlag binds -o/--output.
func addOutputFlag(fs *pflag.FlagSet, p *string, allowed ...string) {
	fs.StringVarP(p, "output", "o", *p, "output format: "+orList(allowed))
}

// addDryRunFlag binds --dry-run=none|client|server; a bare --dry-run is client.
func addDryRunFlag(fs *pflag.FlagSet, p *string, what string) {
	fs.StringVar(p, "dry-run", *p, `"none" `+what+`, "client" prints what would be done and writes nothing, "server" sends the writes with the apiserver's dryRun=All (validated, admitted, not stored)`)
	fs.Lookup("dry-run").NoOptDefVal = DryRunClient
}

// validDryRun checks --dry-run; true and false are client and none.
func validDryRun(p *string) error {
	switch *p {
	case DryRunClient, DryRunServer, DryRunNone:
	case "true":
		*p = DryRunClient
	case "", "false":
		*p = DryRunNone
	default:
		return usagef("--dry-run %q: want none, client or server", *p)
	}
	return nil
}

// serverDryRun returns a copy of cfg whose every write carries dryRun=All: the
// apiserver validates and admits it (RBAC, webhooks) and stores nothing.
func serverDryRun(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return dryRunAll{rt} })
	return c
}

type dryRunAll struct{ next http.RoundTripper }

func (d dryRunAll) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		r = r.Clone(r.Context())
		q := r.URL.Query()
		q.Set("dryRun", "All")
		r.URL.RawQuery = q.Encode()
	}
	return d.next.RoundTrip(r)
}

// writeStructured writes v as JSON or YAML; it reports false for other formats.
func writeStructured(w io.Writer, format string, v any) (bool, error) {
	switch format {
	case OutputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return true, enc.Encode(v)
	case OutputYAML:
		b, err := yaml.Marshal(v)
		if err == nil {
			_, err = w.Write(b)
		}
		return true, err
	}
	return false, nil
}

// flagError is every command's flag error: a usage error, with the closest flag
// suggested for an unknown one (as cobra suggests subcommands).
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	var word string
	switch {
	case strings.HasPrefix(msg, "unknown flag: --"):
		word = strings.TrimPrefix(msg, "unknown flag: --")
	case strings.HasPrefix(msg, "unknown shorthand flag: "):
		// -namespace: a long flag typed with one dash, as the old Job's form does
		if _, after, ok := strings.Cut(msg, " in -"); ok {
			word = after
		}
	}
	word, _, _ = strings.Cut(word, "=")
	if word == "" {
		return usageError{err}
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	for _, n := range names {
		if n == word {
			return usageError{fmt.Errorf("%w (did you mean --%s?)", err, n)}
		}
	}
	if s := suggest(word, names); s != "" {
		return usageError{fmt.Errorf("%w (did you mean --%s?)", err, s)}
	}
	return usageError{err}
}

func structured(format string) bool { return format == OutputJSON || format == OutputYAML }

// Colours of the text outputs: only on a terminal, never with NO_COLOR set
// (no-color.org) or when the output is piped (useColor).
const (
	colorRed    = "31"
	colorGreen  = "32"
	colorYellow = "33"
)

// palette colours text when true (useColor).
type palette bool

func (p palette) paint(color, s string) string {
	if !p {
		return s
	}
	return "\033[" + color + "m" + s + "\033[0m"
}

// useColor reports whether w gets colours: a terminal, and NO_COLOR unset.
func useColor(w io.Writer) bool {
	_, noColor := os.LookupEnv("NO_COLOR")
	return !noColor && isTerminal(w)
}
