package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// ExecInfoEnv is the environment variable client-go (and this service) sets for every
// Kubernetes credential plugin it runs. The one-shot commands refuse a trusted listing
// when it is set: they are then run by a credential plugin, not by a person.
const ExecInfoEnv = "KUBERNETES_EXEC_INFO"

// ErrCredentials: a cluster's credential plugin failed, timed out or is backing off.
var ErrCredentials = errors.New("cluster credentials unavailable")

// Backoff between failed runs of one credential plugin.
const (
	execBackoffMin = 2 * time.Second
	execBackoffMax = 5 * time.Minute
	execMaxOutput  = 1 << 20
)

// execCreds runs one cluster's credential plugin (an allowed execProviderConfig) in
// place of client-go's exec authenticator, which runs plugins without a deadline and
// again on every request after a failure. Here every run has a deadline and is killed
// with its whole process group when it ends, when the cluster is removed, or when the
// service stops; runs are single-flight; a failure is remembered and answered at once
// until the backoff (doubling, execBackoffMin to execBackoffMax) lets the next run.
type execCreds struct {
	path, apiVersion string
	args, env        []string
	timeout          time.Duration
	now              func() time.Time
	// cluster is KUBERNETES_EXEC_INFO's spec.cluster; nil: none.
	cluster json.RawMessage

	life   context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	token   string
	expiry  time.Time // zero: valid until a 401
	running chan struct{}
	lastErr error
	nextTry time.Time
	backoff time.Duration
	runs    int
}

func newExecCreds(path, apiVersion string, args, env []string, timeout time.Duration) *execCreds {
	life, cancel := context.WithCancel(context.Background())
	return &execCreds{path: path, apiVersion: apiVersion, args: args, env: env, timeout: timeout, now: time.Now,
		life: life, cancel: cancel}
}

// Close kills a run in progress and makes every later request fail: the cluster is gone.
func (e *execCreds) Close() { e.cancel() }

// Runs returns how many times the plugin was started.
func (e *execCreds) Runs() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs
}

// get returns a valid token: the cached one, the last failure during the backoff, or
// the result of a run (started here or by a concurrent caller), waiting while ctx lives.
func (e *execCreds) get(ctx context.Context) (string, error) {
	for {
		e.mu.Lock()
		now := e.now()
		switch {
		case e.life.Err() != nil:
			e.mu.Unlock()
			return "", fmt.Errorf("%w: the cluster was removed", ErrCredentials)
		case e.token != "" && (e.expiry.IsZero() || now.Before(e.expiry.Add(-10*time.Second))):
			t := e.token
			e.mu.Unlock()
			return t, nil
		case e.running == nil && e.lastErr != nil && now.Before(e.nextTry):
			err := fmt.Errorf("%w: %w (next try in %s)", ErrCredentials, e.lastErr, e.nextTry.Sub(now).Round(time.Second))
			e.mu.Unlock()
			return "", err
		case e.running == nil:
			e.running = make(chan struct{})
			e.runs++
			go e.run(e.running)
		}
		wait := e.running
		e.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return "", fmt.Errorf("%w: waiting for the credential plugin: %w", ErrCredentials, context.Cause(ctx))
		}
	}
}

// run starts the plugin once, records its token or its failure, and closes done.
func (e *execCreds) run(done chan struct{}) {
	tok, exp, err := e.exec()
	e.mu.Lock()
	defer e.mu.Unlock()
	defer close(done)
	e.running = nil
	if err != nil {
		e.token, e.lastErr = "", err
		e.backoff = min(max(2*e.backoff, execBackoffMin), execBackoffMax)
		e.nextTry = e.now().Add(e.backoff)
		return
	}
	e.token, e.expiry, e.lastErr, e.backoff = tok, exp, nil, 0
}

// invalidate forgets tok after the apiserver refused it (401), as client-go does.
func (e *execCreds) invalidate(tok string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.token == tok {
		e.token = ""
	}
}

// exec runs the plugin under its deadline and parses its ExecCredential.
func (e *execCreds) exec() (string, time.Time, error) {
	ctx, cancel := context.WithTimeout(e.life, e.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.path, e.args...)
	info := fmt.Sprintf(`{"apiVersion":%q,"kind":"ExecCredential","spec":{"interactive":false}}`, e.apiVersion)
	if e.cluster != nil {
		info = fmt.Sprintf(`{"apiVersion":%q,"kind":"ExecCredential","spec":{"interactive":false,"cluster":%s}}`, e.apiVersion, e.cluster)
	}
	cmd.Env = append(append(os.Environ(), e.env...), ExecInfoEnv+"="+info)
	var stdout, stderr limitedBuffer
	stdout.max, stderr.max = execMaxOutput, 4096
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	killGroup(cmd)
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", time.Time{}, fmt.Errorf("credential plugin %s did not finish within %s: %w", e.path, e.timeout, context.Cause(ctx))
		}
		return "", time.Time{}, fmt.Errorf("credential plugin %s: %w: %s", e.path, err, core.OneLine(core.Clip(stderr.String())))
	}
	return parseExecCredential(stdout.Bytes(), e.apiVersion, e.now())
}

// parseExecCredential reads a plugin's ExecCredential: a token, optionally with an
// expiry. Client certificates are not supported (refused with a clear error).
func parseExecCredential(out []byte, apiVersion string, now time.Time) (string, time.Time, error) {
	var ec struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Status     *struct {
			Token                 string     `json:"token"`
			ExpirationTimestamp   *time.Time `json:"expirationTimestamp"`
			ClientCertificateData string     `json:"clientCertificateData"`
		} `json:"status"`
	}
	if err := json.Unmarshal(out, &ec); err != nil {
		return "", time.Time{}, fmt.Errorf("credential plugin output is not an ExecCredential: %w", err)
	}
	switch {
	case ec.Kind != "ExecCredential" || ec.APIVersion != apiVersion:
		return "", time.Time{}, fmt.Errorf("credential plugin output is %s %q, want ExecCredential %q", core.Clip(ec.Kind), core.Clip(ec.APIVersion), apiVersion)
	case ec.Status == nil:
		return "", time.Time{}, errors.New("credential plugin output has no status")
	case ec.Status.ClientCertificateData != "":
		return "", time.Time{}, errors.New("credential plugin returned a client certificate: only tokens are supported")
	case ec.Status.Token == "":
		return "", time.Time{}, errors.New("credential plugin returned no token")
	}
	var exp time.Time
	if ec.Status.ExpirationTimestamp != nil {
		exp = *ec.Status.ExpirationTimestamp
		if !exp.After(now) {
			return "", time.Time{}, fmt.Errorf("credential plugin returned a token that expired at %s", exp.Format(time.RFC3339))
		}
	}
	return ec.Status.Token, exp, nil
}

// wrap is a rest.Config.WrapTransport: every request carries the plugin's token.
func (e *execCreds) wrap(rt http.RoundTripper) http.RoundTripper {
	return execRoundTripper{e: e, next: rt}
}

type execRoundTripper struct {
	e    *execCreds
	next http.RoundTripper
}

// RoundTrip implements http.RoundTripper. A request that already carries credentials
// (a kubeconfig user with a token beside its exec plugin) is sent as it is, without a
// run, as client-go's exec authenticator does; a Secret's plugin replaces its token.
func (t execRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") != "" {
		return t.next.RoundTrip(req)
	}
	tok, err := t.e.get(req.Context())
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := t.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		t.e.invalidate(tok)
	}
	return resp, err
}

// limitedBuffer keeps the first max bytes written and drops the rest.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
