package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
)

// TestConcurrentWriterLosesNothing: while a writer hammers the data of the same
// ConfigMaps (read-modify-write with resourceVersion, so it sees 409 conflicts), every
// attach succeeds and every write the writer made is kept; the service's patch touches
// metadata.ownerReferences only. Bounded: 20 ReplicaSets, 4 shared ConfigMaps.
func TestConcurrentWriterLosesNothing(t *testing.T) {
	e := newHostileEnv(t, "conflicts")
	ctx := context.Background()
	cms := []string{"shared-0", "shared-1", "shared-2", "shared-3"}
	var env []corev1.EnvFromSource
	for _, name := range cms {
		_, err := e.kc.CoreV1().ConfigMaps(e.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{core.LabelRevision: "true"}}, Data: map[string]string{}}, metav1.CreateOptions{})
		require.NoError(t, err)
		env = append(env, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}})
	}
	var sets []*appsv1.ReplicaSet
	zero := int32(0)
	for i := range 20 {
		labels := map[string]string{"app": fmt.Sprintf("c-%d", i)}
		rs, err := e.kc.AppsV1().ReplicaSets(e.ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c-%d", i)},
			Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "c", Image: "i", EnvFrom: env}}}}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		sets = append(sets, rs)
	}

	// The writer: each successful update adds key w<n> to one ConfigMap.
	stop := make(chan struct{})
	var conflicts, writes atomic.Int64
	written := map[string][]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range cms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				cm, err := e.kc.CoreV1().ConfigMaps(e.ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					continue
				}
				if cm.Data == nil {
					cm.Data = map[string]string{}
				}
				key := fmt.Sprintf("w%d", n)
				cm.Data[key] = "v"
				if _, err := e.kc.CoreV1().ConfigMaps(e.ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
					conflicts.Add(1)
					continue
				}
				writes.Add(1)
				mu.Lock()
				written[name] = append(written[name], key)
				mu.Unlock()
			}
		}()
	}
	var failed atomic.Int64
	var sendWG sync.WaitGroup
	for _, rs := range sets {
		sendWG.Add(1)
		go func() {
			defer sendWG.Done()
			// A Sensor retries a retryable answer (503/429); so does this sender, a few times.
			for try := 1; ; try++ {
				resp, err := http.Post("http://"+e.srv.HTTPAddr()+"/", "application/json", strings.NewReader(eventData(e.ns, rs.Name, string(rs.UID))))
				if err == nil && resp.StatusCode == http.StatusOK {
					resp.Body.Close()
					return
				}
				retryable := err == nil && (resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusTooManyRequests)
				if resp != nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					t.Logf("%s: try %d answered %d: %s", rs.Name, try, resp.StatusCode, b)
				}
				if !retryable || try == 3 {
					failed.Add(1)
					return
				}
				time.Sleep(200 * time.Millisecond)
			}
		}()
	}
	sendWG.Wait()
	time.Sleep(300 * time.Millisecond) // let the writer race a little past the last attach
	close(stop)
	wg.Wait()
	assert.Zero(t, failed.Load(), "every attach succeeds")
	for _, name := range cms {
		cm, err := e.kc.CoreV1().ConfigMaps(e.ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Len(t, cm.OwnerReferences, len(sets), "%s: every ReplicaSet owns it", name)
		for _, key := range written[name] {
			assert.Contains(t, cm.Data, key, "%s: the writer's data is kept", name)
		}
	}
	t.Logf("writer: %d writes, %d conflicts; attaches: %d, all succeeded; data lost: 0", writes.Load(), conflicts.Load(), len(sets))
}
