package cli

import (
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/configmap-attacher/configmap-attacher/internal/ingress/eventbus"
)

// EventBusFlags are the EventBus connection flags shared by serve and eventsource.
// Credentials come from files (a mounted EventBus accessSecret), never from arguments.
type EventBusFlags struct {
	URL          string
	AuthFile     string
	TokenFile    string
	User         string
	PasswordFile string
	CAFile       string
	CertFile     string
	KeyFile      string
	Insecure     bool
	PlainText    bool
}

// AddFlags binds the flags.
func (f *EventBusFlags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.URL, "eventbus-url", f.URL, "NATS URL of the Argo Events EventBus (JetStream), e.g. nats://eventbus-default-js-svc:4222")
	fs.StringVar(&f.AuthFile, "eventbus-auth-file", f.AuthFile, "the EventBus credentials as Argo Events mounts them for its Sensors: the JetStream accessSecret's client-auth key (YAML: username/password, or token), e.g. /etc/eventbus/auth/auth.yaml")
	fs.StringVar(&f.TokenFile, "eventbus-token-file", f.TokenFile, "file holding the EventBus token")
	fs.StringVar(&f.User, "eventbus-user", f.User, "EventBus user (with --eventbus-password-file)")
	fs.StringVar(&f.PasswordFile, "eventbus-password-file", f.PasswordFile, "file holding the EventBus password")
	fs.StringVar(&f.CAFile, "eventbus-tls-ca-file", f.CAFile, "CA bundle that signs the EventBus certificate")
	fs.StringVar(&f.CertFile, "eventbus-tls-cert-file", f.CertFile, "client certificate for mutual TLS")
	fs.StringVar(&f.KeyFile, "eventbus-tls-key-file", f.KeyFile, "client key for mutual TLS")
	fs.BoolVar(&f.Insecure, "eventbus-tls-insecure", f.Insecure, "do not verify the EventBus certificate (what Argo Events' clients do without a TLS config)")
	fs.BoolVar(&f.PlainText, "eventbus-plaintext", f.PlainText, "dial without TLS (only for a NATS server that does not offer it)")
}

// Validate checks the flags without reading the credential files. Errors are usage errors.
func (f *EventBusFlags) Validate() error {
	switch {
	case f.URL == "":
		return usagef("--eventbus-url is required")
	case f.TokenFile != "" && (f.User != "" || f.PasswordFile != ""):
		return usagef("use --eventbus-token-file or --eventbus-user/--eventbus-password-file, not both")
	case f.AuthFile != "" && (f.TokenFile != "" || f.User != "" || f.PasswordFile != ""):
		return usagef("--eventbus-auth-file holds the credentials: use it without --eventbus-token-file, --eventbus-user and --eventbus-password-file")
	case (f.User != "" || f.PasswordFile != "") && (f.User == "" || f.PasswordFile == ""):
		return usagef("--eventbus-user and --eventbus-password-file go together")
	case (f.CertFile == "") != (f.KeyFile == ""):
		return usagef("--eventbus-tls-cert-file and --eventbus-tls-key-file go together")
	}
	return nil
}

// Conn checks the flags and returns the connection they describe, with the credentials
// read from their files. Errors are usage errors.
func (f *EventBusFlags) Conn() (eventbus.Conn, error) {
	c := eventbus.Conn{URL: f.URL, TLS: eventbus.TLS{CAFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile,
		InsecureSkipVerify: f.Insecure, Disable: f.PlainText}}
	if err := f.Validate(); err != nil {
		return c, err
	}
	var err error
	if f.AuthFile != "" {
		if c.Auth, err = eventbus.ReadAuthFile(f.AuthFile); err != nil {
			return c, usageError{err}
		}
	}
	if f.TokenFile != "" {
		if c.Auth.Token, err = readSecretFile("--eventbus-token-file", f.TokenFile); err != nil {
			return c, err
		}
	}
	if f.User != "" {
		c.Auth.User = f.User
		if c.Auth.Password, err = readSecretFile("--eventbus-password-file", f.PasswordFile); err != nil {
			return c, err
		}
	}
	return c, nil
}

// readSecretFile reads a credential file; the error names the flag, never the content.
func readSecretFile(flag, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", usagef("%s: %v", flag, err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", usagef("%s: %s is empty", flag, path)
	}
	return v, nil
}

// parseKeyValues parses repeated key=value flags.
func parseKeyValues(flag string, kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("%s %q: want key=value", flag, kv)
		}
		out[k] = v
	}
	return out, nil
}
