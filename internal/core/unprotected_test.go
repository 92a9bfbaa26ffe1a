package core

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestUnprotectedRevisionsAreTheOnesANeighbourDeletesAnyway(t *testing.T) {
	yes := true
	esOwner := func(name string) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: "external-secrets.io/v1", Kind: "ExternalSecret", Name: name, UID: "es-uid", Controller: &yes}
	}
	rsOwner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-abc", UID: "rs-uid"}
	esoSecret := func(name string, owners ...metav1.OwnerReference) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelRevision: "true", ESOCreatedByLabel: "3f2a"},
			OwnerReferences: owners}
	}
	withSyncOptions := func(v string) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Name: "cfg-1", Annotations: map[string]string{ArgoCDSyncOptions: v}}
	}
	tests := []struct {
		name    string
		kind    Kind
		meta    *metav1.ObjectMeta
		reasons []string
	}{
		{"a Secret ESO writes under a target name of its own is the rename-the-target pattern",
			KindSecret, esoSecret("app-v1", esOwner("app"), rsOwner), []string{ReasonExternalSecretRename}},
		{"a Secret that carries its ExternalSecret's name (one ExternalSecret per revision) is protected",
			KindSecret, esoSecret("app-5f7c9", esOwner("app-5f7c9"), rsOwner), nil},
		{"without ESO's created-by label (creationPolicy Merge or Orphan) ESO never deletes it",
			KindSecret, &metav1.ObjectMeta{Name: "app-v1", OwnerReferences: []metav1.OwnerReference{esOwner("app")}}, nil},
		{"the created-by label without an ExternalSecret controller is someone else's label",
			KindSecret, esoSecret("app-v1", rsOwner), nil},
		{"an ExternalSecret of another API group is not ESO's",
			KindSecret, esoSecret("app-v1", metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "ExternalSecret", Name: "app", Controller: &yes}), nil},
		{"a ConfigMap is never ESO's target", KindConfigMap, esoSecret("app-v1", esOwner("app")), nil},
		{"ControllerReferencesOnly=true on the revision opts out of the owners' protection",
			KindConfigMap, withSyncOptions("ControllerReferencesOnly=true"), []string{ReasonNotProtectedFromPruning}},
		{"among other options, with spaces", KindSecret, withSyncOptions("PruneLast=true, ControllerReferencesOnly=true"),
			[]string{ReasonNotProtectedFromPruning}},
		{"Prune=false beside it keeps Argo CD from pruning it", KindConfigMap,
			withSyncOptions("ControllerReferencesOnly=true,Prune=false"), nil},
		{"ControllerReferencesOnly=false is the default", KindConfigMap, withSyncOptions("ControllerReferencesOnly=false"), nil},
		{"both at once", KindSecret, func() *metav1.ObjectMeta {
			m := esoSecret("app-v1", esOwner("app"))
			m.Annotations = map[string]string{ArgoCDSyncOptions: "ControllerReferencesOnly=true"}
			return m
		}(), []string{ReasonExternalSecretRename, ReasonNotProtectedFromPruning}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Unprotected(tc.kind, tc.meta)
			if len(got) != len(tc.reasons) {
				t.Fatalf("Unprotected = %+v, want reasons %v", got, tc.reasons)
			}
			for i, w := range got {
				if w.Reason != tc.reasons[i] || w.Message == "" || w.Fix == "" {
					t.Fatalf("warning %d = %+v, want reason %s with a message and a fix", i, w, tc.reasons[i])
				}
			}
			if len(got) > 0 && got[0].Reason == ReasonExternalSecretRename && (got[0].Subject == nil || got[0].Subject.Name != "app") {
				t.Fatalf("the rename warning names ExternalSecret %+v, want app", got[0].Subject)
			}
		})
	}
}

func TestEveryProposedSpellingOfControllerOnlyOwnersTurnsTheProtectionOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []string
		want string
	}{
		{"per-object option (argo-cd #24814)", []string{"ControllerReferencesOnly=true"}, "ControllerReferencesOnly=true"},
		{"app option (argo-cd #26556)", []string{"CreateNamespace=true", "IgnoreOwnerReferencesOnPrune=true"}, "IgnoreOwnerReferencesOnPrune=true"},
		{"gitops-engine #501", []string{"RespectControllerReferencesOnly=true"}, "RespectControllerReferencesOnly=true"},
		{"argo-cd #12210", []string{"RespectOwnerReferencesOnly=true"}, "RespectOwnerReferencesOnly=true"},
		{"an unsettled name with refs (argo-cd #26669)", []string{"PruneIgnoringOwnerRefs=true"}, "PruneIgnoringOwnerRefs=true"},
		{"case and spaces", []string{" controllerreferencesonly = TRUE "}, "controllerreferencesonly = TRUE"},
		{"set to false", []string{"ControllerReferencesOnly=false"}, ""},
		{"no value", []string{"ControllerReferencesOnly"}, ""},
		{"unrelated options", []string{"Prune=true", "ServerSideApply=true", "PruneLast=true"}, ""},
		{"none", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OwnerProtectionOff(tc.opts); got != tc.want {
				t.Fatalf("OwnerProtectionOff(%q) = %q, want %q", tc.opts, got, tc.want)
			}
		})
	}
}

func TestTheRevisionsApplicationIsReadFromItsTracking(t *testing.T) {
	for _, tc := range []struct {
		name         string
		annotations  map[string]string
		labels       map[string]string
		wantNS, want string
		wantFound    bool
	}{
		{"annotation tracking, Argo CD's namespace", map[string]string{ArgoCDTrackingID: "web:/ConfigMap:prod/cfg-1"}, nil, "", "web", true},
		{"annotation tracking, apps in any namespace", map[string]string{ArgoCDTrackingID: "team-a_web:/ConfigMap:prod/cfg-1"}, nil, "team-a", "web", true},
		{"label tracking", nil, map[string]string{ArgoCDInstanceLabel: "web"}, "", "web", true},
		{"the annotation wins over the label", map[string]string{ArgoCDTrackingID: "api:/ConfigMap:prod/cfg-1"}, map[string]string{ArgoCDInstanceLabel: "web"}, "", "api", true},
		{"an empty app name", map[string]string{ArgoCDTrackingID: ":/ConfigMap:prod/cfg-1"}, nil, "", "", false},
		{"a namespace without a name", map[string]string{ArgoCDTrackingID: "team-a_:/ConfigMap:prod/cfg-1"}, nil, "team-a", "", false},
		{"untracked", nil, nil, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, name, ok := TrackingApp(&metav1.ObjectMeta{Annotations: tc.annotations, Labels: tc.labels})
			if ok != tc.wantFound || (ok && (ns != tc.wantNS || name != tc.want)) {
				t.Fatalf("TrackingApp = %q, %q, %v; want %q, %q, %v", ns, name, ok, tc.wantNS, tc.want, tc.wantFound)
			}
		})
	}
}
