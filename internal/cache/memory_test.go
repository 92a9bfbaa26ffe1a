package cache

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/configmap-attacher/configmap-attacher/internal/dev/bench/fixture"
)

// TestMemoryPerStoredObject is an experiment, not a check (run it with
// CACHE_MEMORY_EXPERIMENT=1; CACHE_MEMORY_RS and CACHE_MEMORY_REVISIONS set the sizes,
// default the bench's 50,000 and 100,000): it fills indexers built as the informers' are
// (same key function and indexes) with bench-shaped ReplicaSets and revision metadata,
// each decoded from protobuf as a list delivers it and stored through the informers'
// transform, and logs the live heap per object for the stored form (record, metaRecord)
// and for the lean Kubernetes structs the informers stored before; CACHE_MEMORY_PROFILE=P
// writes the live heap's profile of each to P.0 and P.1.
func TestMemoryPerStoredObject(t *testing.T) {
	if os.Getenv("CACHE_MEMORY_EXPERIMENT") == "" {
		t.Skip("an experiment: set CACHE_MEMORY_EXPERIMENT=1 to run it")
	}
	nRS, nRev := envInt("CACHE_MEMORY_RS", 50000), envInt("CACHE_MEMORY_REVISIONS", 100000)
	rsIndexers := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc,
		UsesIndex: usesIndexFunc, ControllerIndex: controllerIndexFunc, ListedIndex: listedIndexFunc}
	revIndexers := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	for i, tc := range []struct {
		name               string
		workload, revision toolscache.TransformFunc
	}{
		{"lean structs (before)", Lean, leanConfigMeta},
		{"records", toRecord, toMetaRecord},
	} {
		rs := toolscache.NewIndexer(toolscache.DeletionHandlingMetaNamespaceKeyFunc, rsIndexers)
		before := liveHeap()
		for i := range nRS {
			require.NoError(t, rs.Add(must(tc.workload(wireReplicaSet(t, i)))))
		}
		mid := liveHeap()
		revs := toolscache.NewIndexer(toolscache.DeletionHandlingMetaNamespaceKeyFunc, revIndexers)
		for i := range nRev {
			require.NoError(t, revs.Add(must(tc.revision(wireRevision(t, i)))))
		}
		after := liveHeap()
		t.Logf("%s: %d ReplicaSets %.0f B each (%.1f MiB), %d revisions %.0f B each (%.1f MiB), total %.1f MiB",
			tc.name, nRS, float64(mid-before)/float64(nRS), mib(mid-before), nRev, float64(after-mid)/float64(nRev), mib(after-mid), mib(after-before))
		if path := os.Getenv("CACHE_MEMORY_PROFILE"); path != "" {
			writeHeapProfile(t, fmt.Sprintf("%s.%d", path, i))
		}
		runtime.KeepAlive(rs)
		runtime.KeepAlive(revs)
	}
}

// writeHeapProfile writes the live heap's profile to path (CACHE_MEMORY_PROFILE: which
// allocations the stored objects are made of).
func writeHeapProfile(t *testing.T, path string) {
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	runtime.GC()
	require.NoError(t, pprof.WriteHeapProfile(f))
}

// wireReplicaSet is the bench's ReplicaSet number i as a protobuf list delivers it.
func wireReplicaSet(t *testing.T, i int) *appsv1.ReplicaSet {
	rs := fixture.RealisticReplicaSet("bench-rsmem", fmt.Sprintf("rsmem-%d", i), "app-config-shared")
	rs.UID, rs.ResourceVersion, rs.Generation = uid(i), strconv.Itoa(100000+i), 1
	rs.CreationTimestamp = metav1.Unix(1700000000+int64(i), 0)
	raw, err := rs.Marshal()
	require.NoError(t, err)
	out := &appsv1.ReplicaSet{}
	require.NoError(t, out.Unmarshal(raw))
	return out
}

// wireRevision is the metadata of the bench's revision number i as the metadata client
// delivers it.
func wireRevision(t *testing.T, i int) *metav1.PartialObjectMetadata {
	cm := fixture.Revision("bench-rsmem", fmt.Sprintf("rev-%d", i), nil)
	m := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"}, ObjectMeta: cm.ObjectMeta}
	m.UID, m.ResourceVersion = uid(nRevOffset+i), strconv.Itoa(300000+i)
	m.CreationTimestamp = metav1.Unix(1700000000+int64(i), 0)
	raw, err := m.Marshal()
	require.NoError(t, err)
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta}
	require.NoError(t, out.Unmarshal(raw))
	return out
}

const nRevOffset = 1 << 30

func uid(i int) types.UID {
	return types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i))
}

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkStoreTransform is what storing one bench ReplicaSet costs (Lean, and the
// record the informers store), and what reading it back costs.
func BenchmarkStoreTransform(b *testing.B) {
	t := &testing.T{}
	rs := wireReplicaSet(t, 1)
	b.Run("Lean", func(b *testing.B) {
		for b.Loop() {
			_, _ = Lean(rs)
		}
	})
	b.Run("toRecord", func(b *testing.B) {
		for b.Loop() {
			_, _ = toRecord(rs)
		}
	})
	r, _ := toRecord(rs)
	b.Run("Decode", func(b *testing.B) {
		for b.Loop() {
			_, _ = Decode(r)
		}
	})
	b.Run("GetOwnerReferences", func(b *testing.B) {
		for b.Loop() {
			_ = r.(*record).GetOwnerReferences()
		}
	})
}
