package trigger

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/argoproj/argo-events/pkg/sensors/triggers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/configmap-attacher/configmap-attacher/internal/core"
	"github.com/configmap-attacher/configmap-attacher/internal/dispatch"
	"github.com/configmap-attacher/configmap-attacher/internal/event"
	"github.com/configmap-attacher/configmap-attacher/internal/testenv/testfix"
)

// fakeReader reads through a fake clientset; hook, when set, runs before every
// ReplicaSet read (to block, fail or time out).
type fakeReader struct {
	kc   kubernetes.Interface
	hook func(ctx context.Context) error
}

func (r *fakeReader) ReplicaSet(ctx context.Context, ns, name string) (*appsv1.ReplicaSet, error) {
	if r.hook != nil {
		if err := r.hook(ctx); err != nil {
			return nil, err
		}
	}
	return r.kc.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
}

func (r *fakeReader) Deployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	return r.kc.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
}

func (r *fakeReader) Rollout(context.Context, string, string) (*unstructured.Unstructured, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "argoproj.io", Resource: "rollouts"}, "")
}

func (r *fakeReader) Users(context.Context, core.Kind, string, string) (*core.Users, error) {
	return &core.Users{}, nil
}

func (r *fakeReader) ObjectMeta(ctx context.Context, kind core.Kind, ns, name string) (*metav1.PartialObjectMetadata, error) {
	cm, err := r.kc.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: cm.ObjectMeta}, nil
}

const rsUID = "0b5e-rs-uid"

func rsPayload(name, uid string) string {
	return `{"type":"ADD","group":"apps","version":"v1","resource":"replicasets","metadata":{"cluster":"in-cluster"},"body":{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"` + name + `","namespace":"shop","uid":"` + uid + `"}}}`
}

type fixture struct {
	kc     *fake.Clientset
	reader *fakeReader
	d      *dispatch.Dispatcher
}

func newFixture(t testing.TB, cfg dispatch.Config) *fixture {
	t.Helper()
	kc := fake.NewClientset(
		&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "shop", UID: rsUID},
			Spec: appsv1.ReplicaSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "app", Image: "app"}},
				Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{
					ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg-1"}}}}},
			}}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg-1", Namespace: "shop", UID: "cm-uid",
			Labels: map[string]string{core.LabelRevision: "true"}}},
	)
	r := &fakeReader{kc: kc}
	a, err := core.NewAttacher(core.Config{Cluster: "in-cluster", Client: kc, Reader: r, Logger: testfix.Quiet()})
	require.NoError(t, err)
	cfg.Clusters, err = dispatch.NewSingleCluster("", a)
	require.NoError(t, err)
	cfg.Logger = testfix.Quiet()
	svc, err := dispatch.New(cfg)
	require.NoError(t, err)
	return &fixture{kc: kc, reader: r, d: svc}
}

func (f *fixture) owners(t *testing.T) []metav1.OwnerReference {
	cm, err := f.kc.CoreV1().ConfigMaps("shop").Get(context.Background(), "cfg-1", metav1.GetOptions{})
	require.NoError(t, err)
	return cm.OwnerReferences
}

func (f *fixture) patches() int {
	n := 0
	for _, a := range f.kc.Actions() {
		if a.GetVerb() == "patch" || a.GetVerb() == "update" || a.GetVerb() == "create" || a.GetVerb() == "delete" {
			n++
		}
	}
	return n
}

// grpcClient serves f.d over bufconn and returns a Trigger client.
func grpcClient(t *testing.T, f *fixture) triggers.TriggerClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := NewGRPCServer(f.d, lis, GRPCOptions{ShutdownTimeout: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(16<<20)))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		require.NoError(t, <-done)
	})
	return triggers.NewTriggerClient(conn)
}

func badField(t *testing.T, err error) string {
	t.Helper()
	st := status.Convert(err)
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.FieldViolations) > 0 {
			return br.FieldViolations[0].Field
		}
	}
	return ""
}

func TestFetchResource(t *testing.T) {
	f := newFixture(t, dispatch.Config{})
	client := grpcClient(t, f)
	bomb := "a: &a [\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\",\"x\"]\n"
	for i, prev := 'b', 'a'; i <= 'j'; prev, i = i, i+1 {
		bomb += string(i) + ": &" + string(i) + " [*" + string(prev) + ",*" + string(prev) + ",*" + string(prev) + ",*" + string(prev) + ",*" + string(prev) + ",*" + string(prev) + ",*" + string(prev) + ",*" + string(prev) + ",*" + string(prev) + "]\n"
	}
	for _, tc := range []struct {
		name, spec string
		code       codes.Code
		field      string
		want       map[string]string
	}{
		{name: "empty spec gives defaults", spec: "", want: map[string]string{"operation": "attach", "discover": "true", "selector": core.DefaultSelector, "includeSecrets": "false", "dryRun": "false"}},
		{name: "YAML as the Sensor sends it", spec: "configMaps: a,b\noperation: attach\n", want: map[string]string{"configMaps": "a,b", "operation": "attach"}},
		{name: "JSON", spec: `{"dryRun":"true","namespace":"shop"}`, want: map[string]string{"dryRun": "true", "namespace": "shop"}},
		{name: "unquoted YAML bool", spec: "discover: false\n", want: map[string]string{"discover": "false"}},
		{name: "unknown key", spec: "colour: blue\n", code: codes.InvalidArgument, field: "colour"},
		{name: "bad bool", spec: "dryRun: maybe\n", code: codes.InvalidArgument, field: "dryRun"},
		{name: "bad selector", spec: "selector: 'a in (b'\n", code: codes.InvalidArgument, field: "selector"},
		{name: "bad name in list", spec: "configMaps: good,Bad_Name\n", code: codes.InvalidArgument, field: "configMaps"},
		{name: "nested map", spec: "configMaps: {a: b}\n", code: codes.InvalidArgument, field: "configMaps"},
		{name: "list value", spec: "secrets: [a, b]\n", code: codes.InvalidArgument, field: "secrets"},
		{name: "not a map", spec: "- a\n- b\n", code: codes.InvalidArgument, field: "spec"},
		{name: "garbage", spec: "{{{:", code: codes.InvalidArgument, field: "spec"},
		{name: "invalid UTF-8", spec: "operation: \xff\xfe", code: codes.InvalidArgument, field: "spec"},
		{name: "too large", spec: "configMaps: " + strings.Repeat("a", MaxSpecBytes), code: codes.InvalidArgument, field: "spec"},
		{name: "alias bomb", spec: bomb, code: codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := client.FetchResource(context.Background(), &triggers.FetchResourceRequest{Resource: []byte(tc.spec)})
			if tc.code != codes.OK {
				require.Error(t, err)
				assert.Equal(t, tc.code, status.Code(err), "%v", err)
				if tc.field != "" {
					assert.Equal(t, tc.field, badField(t, err))
					assert.Contains(t, status.Convert(err).Message(), tc.field)
				}
				return
			}
			require.NoError(t, err)
			var got map[string]string
			require.NoError(t, json.Unmarshal(resp.Resource, &got))
			assert.Len(t, got, 9, "every key is present in the normalised spec")
			for k, v := range tc.want {
				assert.Equal(t, v, got[k], k)
			}
			// The normalised spec is accepted back unchanged (Execute receives it).
			again, err := ParseSpec(resp.Resource, core.ParseSpec)
			require.NoError(t, err)
			assert.Equal(t, got, again.Spec())
		})
	}
	assert.Zero(t, f.patches(), "FetchResource changes nothing")
}

func TestExecute(t *testing.T) {
	f := newFixture(t, dispatch.Config{})
	client := grpcClient(t, f)
	ctx := context.Background()
	spec := func(s map[string]string) []byte {
		o, err := core.ParseSpec(s)
		require.NoError(t, err)
		b, err := NormalizedSpec(o)
		require.NoError(t, err)
		return b
	}
	good := rsPayload("web-1", rsUID)

	t.Run("bad requests change nothing", func(t *testing.T) {
		for _, tc := range []struct {
			name, resource, payload string
			code                    codes.Code
			field                   string
		}{
			{"bad spec", `{"dryRun":"perhaps"}`, good, codes.InvalidArgument, "dryRun"},
			{"unknown spec key", `{"rm":"-rf"}`, good, codes.InvalidArgument, "rm"},
			{"empty payload", `{}`, ``, codes.InvalidArgument, "payload"},
			{"payload not JSON", `{}`, `<xml/>`, codes.InvalidArgument, "payload"},
			{"payload not a ReplicaSet", `{}`, `{"body":{"kind":"Secret","metadata":{"name":"a","namespace":"shop"}}}`, codes.InvalidArgument, "body.kind"},
			{"payload without name", `{}`, `{"body":{"kind":"ReplicaSet","metadata":{"namespace":"shop"}}}`, codes.InvalidArgument, "body.metadata.name"},
			{"hostile name", `{}`, `{"body":{"kind":"ReplicaSet","metadata":{"name":"../../x","namespace":"shop"}}}`, codes.InvalidArgument, "body.metadata.name"},
			{"deep payload", `{}`, strings.Repeat("[", 10000) + strings.Repeat("]", 10000), codes.InvalidArgument, "payload"},
			{"huge payload", `{}`, `{"body":"` + strings.Repeat("x", event.MaxPayloadBytes) + `"}`, codes.InvalidArgument, "payload"},
			{"beyond the gRPC message limit", `{}`, strings.Repeat("x", MaxGRPCMessageBytes+1), codes.ResourceExhausted, ""},
			{"unknown cluster", `{}`, strings.Replace(good, "in-cluster", "mars", 1), codes.InvalidArgument, "cluster"},
			{"spec cluster wins and is unknown", `{"cluster":"venus"}`, good, codes.InvalidArgument, "cluster"},
			{"UID mismatch", `{}`, rsPayload("web-1", "other-uid"), codes.FailedPrecondition, ""},
			{"ReplicaSet gone", `{}`, rsPayload("web-0", ""), codes.NotFound, ""},
			{"namespace not allowed", `{"namespace":"other"}`, good, codes.FailedPrecondition, ""},
			{"gc not served here", `{"operation":"gc"}`, good, codes.Unimplemented, ""},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := client.Execute(ctx, &triggers.ExecuteRequest{Resource: []byte(tc.resource), Payload: []byte(tc.payload)})
				require.Error(t, err)
				want := tc.code
				if want == codes.NotFound {
					want = codes.FailedPrecondition // a missing ReplicaSet is refused (safety rule 2)
				}
				assert.Equal(t, want, status.Code(err), "%v", err)
				if tc.field != "" {
					assert.Equal(t, tc.field, badField(t, err), "%v", err)
				}
				assert.Empty(t, f.owners(t))
				assert.Zero(t, f.patches())
			})
		}
	})

	t.Run("non-ADD is acknowledged and ignored", func(t *testing.T) {
		resp, err := client.Execute(ctx, &triggers.ExecuteRequest{Resource: spec(nil), Payload: []byte(strings.Replace(good, `"ADD"`, `"DELETE"`, 1))})
		require.NoError(t, err)
		var r dispatch.Response
		require.NoError(t, json.Unmarshal(resp.Response, &r))
		assert.Contains(t, r.Ignored, "DELETE")
		pol, err := client.ApplyPolicy(ctx, &triggers.ApplyPolicyRequest{Request: resp.Response})
		require.NoError(t, err)
		assert.True(t, pol.Success)
		assert.Zero(t, f.patches())
	})

	t.Run("dry run writes nothing", func(t *testing.T) {
		resp, err := client.Execute(ctx, &triggers.ExecuteRequest{Resource: spec(map[string]string{"dryRun": "true"}), Payload: []byte(good)})
		require.NoError(t, err)
		var r dispatch.Response
		require.NoError(t, json.Unmarshal(resp.Response, &r))
		require.Len(t, r.Objects, 1)
		assert.Equal(t, core.OutcomeWouldAttach, r.Objects[0].Outcome)
		assert.Zero(t, f.patches())
	})

	t.Run("attach, then replay is a no-op", func(t *testing.T) {
		for i, want := range []core.Outcome{core.OutcomeAttached, core.OutcomeAlreadyAttached} {
			before := f.patches()
			resp, err := client.Execute(ctx, &triggers.ExecuteRequest{Resource: spec(nil), Payload: []byte(good)})
			require.NoError(t, err)
			var r dispatch.Response
			require.NoError(t, json.Unmarshal(resp.Response, &r))
			require.Len(t, r.Objects, 1)
			assert.Equal(t, want, r.Objects[0].Outcome)
			assert.Equal(t, "in-cluster", r.Cluster)
			assert.Equal(t, types(rsUID), string(r.UID))
			assert.Equal(t, 1-i, f.patches()-before, "writes")
			pol, err := client.ApplyPolicy(ctx, &triggers.ApplyPolicyRequest{Request: resp.Response})
			require.NoError(t, err)
			assert.True(t, pol.Success)
			assert.Contains(t, pol.Message, "1 "+string(want))
		}
		owners := f.owners(t)
		require.Len(t, owners, 1)
		assert.Equal(t, rsUID, string(owners[0].UID))
		assert.False(t, *owners[0].Controller)
		assert.Nil(t, owners[0].BlockOwnerDeletion)
	})

	t.Run("escaped body as Argo dataKey sends it", func(t *testing.T) {
		body := `{"apiVersion":"apps/v1","kind":"ReplicaSet","metadata":{"name":"web-1","namespace":"shop","uid":"` + rsUID + `"}}`
		q, _ := json.Marshal(body)
		_, err := client.Execute(ctx, &triggers.ExecuteRequest{Resource: spec(nil), Payload: []byte(`{"type":"ADD","body":` + string(q) + `}`)})
		require.NoError(t, err)
	})
}

func types(s string) string { return s }

func TestApplyPolicy(t *testing.T) {
	f := newFixture(t, dispatch.Config{})
	client := grpcClient(t, f)
	failed, _ := json.Marshal(dispatch.Response{Result: core.Result{Namespace: "shop", ReplicaSet: "web-1", Objects: []core.ObjectResult{
		{Kind: core.KindConfigMap, Name: "a", Outcome: core.OutcomeAttached},
		{Kind: core.KindConfigMap, Name: "b", Outcome: core.OutcomeError, Reason: "forbidden"}}}})
	ok, _ := json.Marshal(dispatch.Response{Result: core.Result{Namespace: "shop", ReplicaSet: "web-1", Objects: []core.ObjectResult{
		{Kind: core.KindConfigMap, Name: "a", Outcome: core.OutcomeAttached}, {Kind: core.KindConfigMap, Name: "c", Outcome: core.OutcomeSkipped}}}})
	for _, tc := range []struct {
		name, req string
		code      codes.Code
		success   bool
		msg       []string
	}{
		{"all good", string(ok), codes.OK, true, []string{"1 attached", "1 skipped"}},
		{"one object failed", string(failed), codes.OK, false, []string{"1 error", "ConfigMap/b"}},
		{"not JSON", "nope", codes.InvalidArgument, false, nil},
		{"empty", "", codes.InvalidArgument, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := client.ApplyPolicy(context.Background(), &triggers.ApplyPolicyRequest{Request: []byte(tc.req)})
			if tc.code != codes.OK {
				assert.Equal(t, tc.code, status.Code(err))
				assert.Equal(t, "request", badField(t, err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.success, resp.Success)
			for _, m := range tc.msg {
				assert.Contains(t, resp.Message, m)
			}
		})
	}
}

func TestExecuteRetryableAnswers(t *testing.T) {
	t.Run("unavailable", func(t *testing.T) {
		f := newFixture(t, dispatch.Config{})
		f.reader.hook = func(context.Context) error { return apierrors.NewServiceUnavailable("etcd is sad") }
		_, err := grpcClient(t, f).Execute(context.Background(), &triggers.ExecuteRequest{Payload: []byte(rsPayload("web-1", rsUID))})
		assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	})
	t.Run("server-side timeout", func(t *testing.T) {
		f := newFixture(t, dispatch.Config{ExecuteTimeout: 50 * time.Millisecond})
		f.reader.hook = func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
		start := time.Now()
		_, err := grpcClient(t, f).Execute(context.Background(), &triggers.ExecuteRequest{Payload: []byte(rsPayload("web-1", rsUID))})
		assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
		assert.Less(t, time.Since(start), 5*time.Second)
	})
	t.Run("too many in flight", func(t *testing.T) {
		f := newFixture(t, dispatch.Config{MaxInFlight: 1})
		entered, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		f.reader.hook = func(ctx context.Context) error {
			once.Do(func() { close(entered) })
			<-release
			return nil
		}
		client := grpcClient(t, f)
		first := make(chan error, 1)
		go func() {
			_, err := client.Execute(context.Background(), &triggers.ExecuteRequest{Payload: []byte(rsPayload("web-1", rsUID))})
			first <- err
		}()
		<-entered
		_, err := client.Execute(context.Background(), &triggers.ExecuteRequest{Payload: []byte(rsPayload("web-1", rsUID))})
		assert.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
		close(release)
		require.NoError(t, <-first)
	})
}

func TestGracefulShutdownFinishesInFlight(t *testing.T) {
	f := newFixture(t, dispatch.Config{})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.reader.hook = func(ctx context.Context) error {
		once.Do(func() { close(entered) })
		<-release
		return nil
	}
	lis := bufconn.Listen(1 << 20)
	srv := NewGRPCServer(f.d, lis, GRPCOptions{ShutdownTimeout: 10 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	result := make(chan error, 1)
	go func() {
		_, err := triggers.NewTriggerClient(conn).Execute(context.Background(), &triggers.ExecuteRequest{Payload: []byte(rsPayload("web-1", rsUID))})
		result <- err
	}()
	<-entered
	cancel()
	select {
	case <-done:
		t.Fatal("server stopped with a call in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	require.NoError(t, <-result, "the in-flight call completes")
	require.NoError(t, <-done)
	assert.Len(t, f.owners(t), 1)
}
