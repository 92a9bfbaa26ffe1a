package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/configmap-attacher/configmap-attacher/internal/cli"
	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/controlplane"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// TestStatusWatchStructuredOutputStaysParseable (breaker s7): -o json and -o yaml print
// valid output. `status --watch` piped (not a terminal) put a "--- <time>" line before
// each re-render: in JSON that is no JSON at all (jq stops there), in YAML it starts a
// document with a scalar that the mapping after it contradicts. JSON re-renders are a
// stream of documents, YAML ones are separated by a bare "---".
func TestStatusWatchStructuredOutputStaysParseable(t *testing.T) {
	cp := controlplane.Require(t, sharedCP)
	kc := cp.Client()
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			ns := newNamespace(t, cp)
			revision := func(name string) {
				_, err := kc.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
					Name: name, Labels: map[string]string{core.LabelRevision: "true"}}}, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			revision("first-1a2b3c")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errb testfix.SyncBuffer
			done := make(chan int, 1)
			go func() {
				done <- cli.Main(ctx, []string{"status", "--kubeconfig", cp.Kubeconfig(), "-n", ns, "--watch", "--interval", "100ms", "-o", format},
					cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb})
			}()
			controlplane.Eventually(t, 60*time.Second, "the first render", func() error {
				if !strings.Contains(out.String(), "first-1a2b3c") {
					return assert.AnError
				}
				return nil
			})
			revision("second-4d5e6f")
			controlplane.Eventually(t, 60*time.Second, "a re-render with the new revision", func() error {
				if !strings.Contains(out.String(), "second-4d5e6f") {
					return assert.AnError
				}
				return nil
			})
			cancel()
			require.Equal(t, 0, <-done, "stderr: %s", errb.String())
			docs, err := structuredDocs(format, out.String())
			require.NoError(t, err, "stdout:\n%s", out.String())
			assert.GreaterOrEqual(t, docs, 2, "stdout:\n%s", out.String())
		})
	}
}

// structuredDocs parses s as a stream of JSON documents or YAML documents and returns
// how many it holds.
func structuredDocs(format, s string) (int, error) {
	n := 0
	if format == "json" {
		dec := json.NewDecoder(strings.NewReader(s))
		for {
			var v any
			if err := dec.Decode(&v); errors.Is(err, io.EOF) {
				return n, nil
			} else if err != nil {
				return n, err
			}
			n++
		}
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(s)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var v any
		if err := yaml.Unmarshal(doc, &v); err != nil {
			return n, err
		}
		if _, ok := v.([]any); !ok {
			return n, errors.New("a document is not the list of reports: " + string(doc))
		}
		n++
	}
}
