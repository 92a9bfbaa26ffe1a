package deploytest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-events/pkg/sensors/triggers"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/configmap-attacher/configmap-attacher/internal/server"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// serviceHost is the name the shipped Sensors connect to.
const serviceHost = releaseName + "." + releaseNamespace + ".svc"

// writeServingCert writes a self-signed certificate for serviceHost as a
// kubernetes.io/tls Secret's files (tls.crt, tls.key) into dir and returns its pool.
func writeServingCert(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: serviceHost},
		DNSNames: []string{serviceHost}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	writeFile(t, filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// localArgs maps the rendered container's arguments onto this machine: the listen
// addresses to free loopback ports, and every path under a Secret volume's mountPath to
// a local directory holding that Secret's files (secrets: Secret name -> file -> content).
func localArgs(t *testing.T, objs []*unstructured.Unstructured, secrets map[string]map[string][]byte) []string {
	t.Helper()
	dep := find(objs, "Deployment", releaseName)
	raw, _, _ := unstructured.NestedMap(dep.Object, "spec", "template")
	var pod corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &pod); err != nil {
		t.Fatal(err)
	}
	dirs := map[string]string{} // mountPath -> local directory
	for _, v := range pod.Spec.Volumes {
		if v.Secret == nil {
			continue
		}
		files, ok := secrets[v.Secret.SecretName]
		if !ok {
			t.Fatalf("the pod mounts Secret %s, which the test does not provide", v.Secret.SecretName)
		}
		dir := filepath.Join(t.TempDir(), v.Name)
		// The kubelet writes every key, or only the listed items under their paths.
		for key, content := range files {
			if len(v.Secret.Items) == 0 {
				writeFile(t, filepath.Join(dir, key), content)
			}
			for _, it := range v.Secret.Items {
				if it.Key == key {
					writeFile(t, filepath.Join(dir, it.Path), content)
				}
			}
		}
		for _, m := range pod.Spec.Containers[0].VolumeMounts {
			if m.Name == v.Name {
				dirs[m.MountPath] = dir
			}
		}
	}
	var out []string
	for _, a := range pod.Spec.Containers[0].Args {
		switch {
		case strings.HasPrefix(a, "--grpc-addr="):
			a = "--grpc-addr=127.0.0.1:0"
		case strings.HasPrefix(a, "--http-addr="):
			a = "--http-addr=127.0.0.1:0"
		case strings.HasPrefix(a, "--metrics-addr="):
			a = "--metrics-addr=127.0.0.1:0"
		}
		for mount, dir := range dirs {
			a = strings.Replace(a, "="+mount+"/", "="+dir+"/", 1)
		}
		out = append(out, a)
	}
	return out
}

// TestChartServesWhatItRenders runs the service in-process from the chart's rendered
// command line (TLS from a Secret, the bearer token from a Secret, both mounted as the
// pod would see them): gRPC, HTTP and the ops listener all speak TLS only; the gRPC custom
// trigger answers an Argo Events client that dials as a Sensor with secure: true does;
// HTTP requires the token for every event; the ops listener answers the probes without
// it, and /metrics takes the same token the ServiceMonitor sends.
func TestChartServesWhatItRenders(t *testing.T) {
	c := controlplane.Require(t, cp)
	objs := renderObjects(t, `
httpAuth: {existingSecret: my-http-token, existingSecretKey: bearer}
tls: {enabled: true, existingSecret: my-serving-cert}
`)
	certDir := t.TempDir()
	pool := writeServingCert(t, certDir)
	crt, _ := os.ReadFile(filepath.Join(certDir, "tls.crt"))
	key, _ := os.ReadFile(filepath.Join(certDir, "tls.key"))
	const token = "the-http-token"
	args := localArgs(t, objs, map[string]map[string][]byte{
		"my-serving-cert": {"tls.crt": crt, "tls.key": key},
		"my-http-token":   {"bearer": []byte(token + "\n"), "other": []byte("not this one")},
	})
	o := parseServeArgs(t, args)
	if err := o.Validate(); err != nil {
		t.Fatalf("serve rejects %q: %v", args, err)
	}
	so := o.ServerOptions()
	so.Logger = testfix.Quiet()
	if err := o.Security.Apply(&so); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(c.RESTConfig(), so)
	if err != nil {
		t.Fatalf("server.New from the chart's arguments: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	defer func() {
		stop()
		<-done
	}()

	// gRPC, as Argo Events' custom trigger dials with secure: true (the CA file, the
	// serverURL's host as the server name), and in plain text.
	fetch := func(creds credentials.TransportCredentials) error {
		conn, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer conn.Close()
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		_, err = triggers.NewTriggerClient(conn).FetchResource(cctx, &triggers.FetchResourceRequest{Resource: []byte("operation: attach\n")})
		return err
	}
	caFile := filepath.Join(certDir, "tls.crt")
	secure, err := credentials.NewClientTLSFromFile(caFile, serviceHost)
	if err != nil {
		t.Fatal(err)
	}
	if err := until(time.Now().Add(30*time.Second), func() error { return fetch(secure) }); err != nil {
		t.Errorf("gRPC over TLS, as a Sensor with secure: true: %v", err)
	}
	if err := fetch(insecure.NewCredentials()); err == nil {
		t.Error("gRPC answers in plain text; with tls.enabled it must speak TLS only")
	}

	// HTTP over TLS with and without the token.
	https := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serviceHost}}}
	base, opsBase := "https://"+srv.HTTPAddr(), "https://"+srv.MetricsAddr()
	do := func(client *http.Client, method, url, auth string, body []byte) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	if err := until(time.Now().Add(60*time.Second), func() error {
		_, err := do(https, http.MethodGet, opsBase+"/healthz", "", nil)
		return err
	}); err != nil {
		t.Fatalf("HTTPS: %v", err)
	}
	rs := []byte(`{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"namespace":"default","name":"no-such-rs","uid":"u"}}`)
	for _, tc := range []struct {
		name, base, method, path, auth string
		body                           []byte
		want                           func(int) bool
	}{
		{"liveness probe without the token", opsBase, http.MethodGet, "/healthz", "", nil, func(c int) bool { return c == http.StatusOK }},
		{"readiness probe without the token", opsBase, http.MethodGet, "/readyz", "", nil, func(c int) bool { return c != http.StatusUnauthorized }},
		{"an event without the token", base, http.MethodPost, "/", "", rs, func(c int) bool { return c == http.StatusUnauthorized }},
		{"an event with a wrong token", base, http.MethodPost, "/", "Bearer other", rs, func(c int) bool { return c == http.StatusUnauthorized }},
		{"an event with the token", base, http.MethodPost, "/", "Bearer " + token, rs, func(c int) bool { return c != http.StatusUnauthorized }},
		{"metrics without the token", opsBase, http.MethodGet, "/metrics", "", nil, func(c int) bool { return c == http.StatusUnauthorized }},
		{"metrics with the ServiceMonitor's token", opsBase, http.MethodGet, "/metrics", "Bearer " + token, nil, func(c int) bool { return c == http.StatusOK }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, err := do(https, tc.method, tc.base+tc.path, tc.auth, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.want(code) {
				t.Errorf("%s %s: %d", tc.method, tc.path, code)
			}
		})
	}
	for _, addr := range []string{srv.HTTPAddr(), srv.MetricsAddr()} {
		if code, err := do(http.DefaultClient, http.MethodGet, "http://"+addr+"/healthz", "", nil); err == nil && code == http.StatusOK {
			t.Errorf("%s answers in plain text; with tls.enabled it must speak TLS only", addr)
		}
	}
}
