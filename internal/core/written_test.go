package core

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestRecentWritesReplaceOnlyTheVersionAWriteWasDecidedOn(t *testing.T) {
	meta := func(uid, rv string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: types.UID("u" + uid), ResourceVersion: rv}}
	}
	var r recentWrites
	after := meta("1", "11")
	r.wrote("ConfigMap/ns/a", "10", after)
	cases := []struct {
		name string
		key  string
		m    *metav1.PartialObjectMetadata
		want *metav1.PartialObjectMetadata
	}{
		{"the version the write was decided on: its successor", "ConfigMap/ns/a", meta("1", "10"), after},
		{"a newer version: kept", "ConfigMap/ns/a", meta("1", "12"), nil},
		{"a namesake (other UID): kept", "ConfigMap/ns/a", meta("2", "10"), nil},
		{"another object: kept", "ConfigMap/ns/b", meta("1", "10"), nil},
		{"no metadata", "ConfigMap/ns/a", nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == nil {
				want = tc.m
			}
			assert.Same(t, want, r.fresher(tc.key, tc.m))
		})
	}
	t.Run("bounded: the oldest is forgotten", func(t *testing.T) {
		for i := range recentWritesCap {
			r.wrote(fmt.Sprintf("ConfigMap/ns/x%d", i), "1", meta("1", "2"))
		}
		assert.Len(t, r.by, recentWritesCap)
		m := meta("1", "10")
		assert.Same(t, m, r.fresher("ConfigMap/ns/a", m))
	})
}

// A server dry-run PATCH (dryRun=All) answers with the owners added but the
// resourceVersion unchanged: nothing was stored. Remembering it would make the live,
// unchanged object look attached ("already attached": the real attach skipped).
func TestRecentWritesForgetAWriteThatLeftTheVersion(t *testing.T) {
	var r recentWrites
	live := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{UID: "u1", ResourceVersion: "10"}}
	dry := live.DeepCopy()
	dry.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "web-1", UID: "rs-1"}}
	r.wrote("ConfigMap/ns/a", "10", dry)
	assert.Same(t, live, r.fresher("ConfigMap/ns/a", live), "a write that stored nothing must not stand in for the live object")
}
