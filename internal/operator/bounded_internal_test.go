package operator

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/release"
)

// Issue 38, item 7: what the operator keeps per identity is bounded. A
// tenant may name any number of ServiceAccounts in annotations, existing or
// not; the clients built to act as them and to review their access, and
// the answers, stay within their bounds, the ones used most recently kept.
func TestPerIdentityCachesAreBounded(t *testing.T) {
	base := &rest.Config{Host: "https://127.0.0.1:1"}
	ids := &identities{base: base, scheme: runtime.NewScheme(), writers: newBounded[string, client.Client](maxIdentities)}
	access := newAccessReviewer(base, nil, time.Now)
	keep := release.Identity{Namespace: "ns", ServiceAccount: "kept"}
	for i := range 3 * maxIdentities {
		id := release.Identity{Namespace: "ns", ServiceAccount: fmt.Sprintf("sa-%d", i)}
		for _, use := range []release.Identity{id, keep} {
			if _, err := ids.writer(use); err != nil {
				t.Fatal(err)
			}
			if _, err := access.client(use); err != nil {
				t.Fatal(err)
			}
		}
		access.answers.put(accessKey{user: id.UserName(), perm: release.Permission{Verb: "create"}}, answer{allowed: true, until: time.Now().Add(time.Hour)})
	}
	for _, a := range []struct {
		what string
		n    int
	}{{"writers", ids.writers.len()}, {"review clients", access.clients.len()}} {
		if a.n > maxIdentities {
			t.Errorf("%d %s kept for %d identities, want at most %d", a.n, a.what, 3*maxIdentities, maxIdentities)
		}
	}
	if n := access.answers.len(); n > maxAnswers {
		t.Errorf("%d answers kept, want at most %d", n, maxAnswers)
	}
	if _, ok := ids.writers.get(keep.UserName()); !ok {
		t.Error("the identity used most recently was dropped")
	}
	if _, ok := ids.writers.get("system:serviceaccount:ns:sa-0"); ok {
		t.Error("the identity used least recently was kept")
	}
}

// The answers are bounded too, however many permissions are asked about.
func TestAnswersAreBounded(t *testing.T) {
	a := newAccessReviewer(&rest.Config{Host: "https://127.0.0.1:1"}, nil, time.Now)
	for i := range 2 * maxAnswers {
		a.answers.put(accessKey{user: "u", perm: release.Permission{Verb: "get", Resource: fmt.Sprint(i)}}, answer{until: time.Now().Add(time.Hour)})
	}
	if n := a.answers.len(); n != maxAnswers {
		t.Errorf("%d answers kept, want %d", n, maxAnswers)
	}
}
