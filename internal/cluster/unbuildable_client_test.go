package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// A cluster whose client configuration cannot be built (a CA that is not PEM, a
// certificate without its key's match) is refused with a clear error when it is
// registered, with a fleet as without one. With a fleet its runtime is built only once
// this replica owns it: it used to be registered, then fail there ("cluster runtime not
// built"), report "ok, owned by another replica" while owned here, and hold the
// start-up readiness gate until its deadline.
func TestAClusterWhoseClientCannotBeBuiltIsRefusedWithAFleetAsWithout(t *testing.T) {
	good := &rest.Config{Host: "https://127.0.0.1:1"}
	for _, tt := range []struct {
		name string
		bad  *rest.Config
	}{
		{name: "a CA that is not PEM", bad: &rest.Config{Host: "https://127.0.0.1:2",
			TLSClientConfig: rest.TLSClientConfig{CAData: []byte("not a certificate")}}},
		{name: "a client certificate that is not PEM", bad: &rest.Config{Host: "https://127.0.0.1:2",
			TLSClientConfig: rest.TLSClientConfig{CertData: []byte("not a certificate"), KeyData: []byte("not a key")}}},
	} {
		for _, fleet := range []bool{false, true} {
			t.Run(tt.name+map[bool]string{false: ", no fleet", true: ", a fleet"}[fleet], func(t *testing.T) {
				o := Options{Clusters: []Spec{{Name: "home", Source: SourceHome, Config: good}, {Name: "bad", Source: SourceKubeconfig, Config: tt.bad}},
					ProbeInterval: time.Hour, Logger: testfix.Quiet()}
				if fleet {
					o.Ownership = &fakeOwnership{owned: map[string]bool{"home": true, "bad": true}}
				}
				_, err := New(o)
				require.Error(t, err, "registering a cluster whose client cannot be built")
				assert.Contains(t, err.Error(), `"bad"`, "the error names the cluster")
			})
		}
	}
}
