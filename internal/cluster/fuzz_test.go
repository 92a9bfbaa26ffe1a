package cluster

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzSpecFromSecret: any Argo CD cluster Secret either converts to a Spec with a valid
// name and an http(s) server, or is refused with an error naming the Secret; the
// credentials in "config" never appear in the error; never a panic.
func FuzzSpecFromSecret(f *testing.F) {
	f.Add("prod", "https://prod.example:6443", `{"bearerToken":"tok","tlsClientConfig":{"caData":"Y2E="}}`, "a,b")
	f.Add("", "https://10.0.0.1", `{"tlsClientConfig":{"insecure":true}}`, "")
	f.Add("eks", "https://eks.example", `{"execProviderConfig":{"command":"aws","args":["eks","get-token"],"apiVersion":"client.authentication.k8s.io/v1beta1"}}`, "")
	f.Add("c", "https://c.example", `{"username":"u","password":"p","proxyUrl":"http://proxy:3128"}`, "")
	f.Add("x", "ftp://x", `{"awsAuthConfig":{"clusterName":"x"}}`, "ns/x")
	f.Add("UPPER", "https://kubernetes.default.svc", "{", " ,, ")
	const secret = "LEAKCHECK-7f3a9c"
	f.Fuzz(func(t *testing.T, name, server, config, namespaces string) {
		config = strings.ReplaceAll(config, "SECRET", secret)
		sp, err := SpecFromSecret(argoSecret(map[string]string{"name": name, "server": server, "config": config, "namespaces": namespaces}))
		if err != nil {
			if !strings.Contains(err.Error(), "argocd/c1") {
				t.Fatalf("error does not name the Secret: %v", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("error leaks a credential: %v", err)
			}
			return
		}
		if err := ValidateName(sp.Name); err != nil {
			t.Fatalf("accepted an invalid cluster name %q: %v", sp.Name, err)
		}
		if sp.Server() == "" {
			return // the in-cluster service account
		}
		u, err := url.Parse(sp.Server())
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			t.Fatalf("accepted a server that is not an http(s) URL: %q", sp.Server())
		}
	})
}
