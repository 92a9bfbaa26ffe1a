package trigger

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"net/http"
	"os"
	"strings"
)

// ErrUnauthenticated means an HTTP request carried no valid bearer token (HTTP 401).
var ErrUnauthenticated = dispatch.ErrUnauthenticated

// MaxTokenBytes bounds a bearer-token file.
const MaxTokenBytes = 4096

// LoadToken reads a bearer token from a file (serve --http-token-file): surrounding
// white space is dropped; an empty file, a token with inner white space or one over
// MaxTokenBytes is an error. Errors name the file, never its content.
func LoadToken(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the HTTP token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	switch {
	case tok == "":
		return nil, fmt.Errorf("HTTP token file %s is empty", path)
	case len(tok) > MaxTokenBytes:
		return nil, fmt.Errorf("HTTP token file %s holds %d bytes, at most %d are allowed", path, len(tok), MaxTokenBytes)
	case strings.ContainsAny(tok, " \t\r\n"):
		return nil, fmt.Errorf("HTTP token file %s holds white space inside the token", path)
	}
	return []byte(tok), nil
}

// Bearer checks "Authorization: Bearer <token>" in constant time. The receiver
// requires it of every event; the ops listener (internal/ops) of /metrics, of /readyz's
// detail and of pprof. A nil *Bearer (no token configured) authenticates nobody.
type Bearer struct {
	sum [sha256.Size]byte // SHA-256 of the token: the compare does not leak its length
}

// NewBearer returns the check of token, or nil for an empty token (none configured).
func NewBearer(token []byte) *Bearer {
	if len(token) == 0 {
		return nil
	}
	return &Bearer{sum: sha256.Sum256(token)}
}

// Valid reports whether r carries the token.
func (a *Bearer) Valid(r *http.Request) bool {
	if a == nil {
		return false // no token configured: nobody is authenticated
	}
	h := r.Header.Get("Authorization")
	const scheme = "bearer "
	if len(h) <= len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(h[len(scheme):])))
	return subtle.ConstantTimeCompare(got[:], a.sum[:]) == 1
}

// wrap returns next behind the bearer-token check (next itself when a is nil). A
// request without a valid token gets 401 with a WWW-Authenticate challenge; the token
// sent is never echoed or logged.
func (a *Bearer) wrap(next http.Handler, d Dispatcher) http.Handler {
	if a == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.Valid(r) {
			next.ServeHTTP(w, r)
			return
		}
		challenge := `Bearer realm="configmap-attacher"`
		msg := "a bearer token is required (Authorization: Bearer <token>)"
		if r.Header.Get("Authorization") != "" {
			challenge += `, error="invalid_token"`
			msg = "the bearer token is not valid"
		}
		ans := d.Reject(r.Context(), dispatch.PathHTTP, core.Event{}, fmt.Errorf("%w: %s", ErrUnauthenticated, msg))
		w.Header().Set("WWW-Authenticate", challenge)
		writeJSON(w, HTTPStatus(ans), errorBody{Error: ans.Err.Error()})
	})
}

// WithClientCA returns a copy of the server TLS configuration cfg that requires and
// verifies client certificates signed by the PEM CA bundle in caFile (mutual TLS).
// cfg must not be nil: mutual TLS needs the server's own certificate.
func WithClientCA(cfg *tls.Config, caFile string) (*tls.Config, error) {
	if caFile == "" {
		return cfg, nil
	}
	if cfg == nil {
		return nil, errors.New("a client CA (mutual TLS) needs TLS: set a certificate and key file too")
	}
	pemBytes, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("reading the TLS client CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		return nil, fmt.Errorf("TLS client CA file %s holds no PEM certificate", caFile)
	}
	out := cfg.Clone()
	out.ClientCAs = pool
	out.ClientAuth = tls.RequireAndVerifyClientCert
	return out, nil
}
