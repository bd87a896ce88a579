package release

import (
	"errors"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/helmapp/helm-app-operator/internal/status"
)

func TestDeniedMessageNamesEachPermissionOnceGrouped(t *testing.T) {
	sa := Identity{Namespace: "team-a", ServiceAccount: "deployer", Source: SourceAnnotation}
	tests := []struct {
		name   string
		id     Identity
		denied []Permission
		want   string
	}{{
		name: "the issue's example, given in any order and with repeats",
		id:   sa,
		denied: []Permission{
			{Verb: "get", Resource: "configmaps", Namespace: "team-a"},
			{Verb: "create", Resource: "services", Namespace: "team-a"},
			{Verb: "create", Group: "apps", Resource: "deployments", Namespace: "team-a"},
			{Verb: "create", Resource: "services", Namespace: "team-a"},
		},
		want: "ServiceAccount team-a/deployer may not: create deployments.apps, create services, get configmaps (in team-a)",
	}, {
		name: "namespaces apart, cluster-scoped last",
		id:   Identity{},
		denied: []Permission{
			{Verb: "create", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"},
			{Verb: "patch", Resource: "services", Namespace: "b"},
			{Verb: "delete", Resource: "configmaps", Namespace: "a"},
		},
		want: "The operator's own identity may not: delete configmaps (in a); patch services (in b); create clusterroles.rbac.authorization.k8s.io (cluster-wide)",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DeniedMessage(tt.id, tt.denied); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestForbiddenErrorsOfHelmNameWhatIsMissing(t *testing.T) {
	// As the API server and Helm word them (kube.Client.Create wraps the
	// API server's status error).
	rbac := errors.New(`services "web" is forbidden: User "system:serviceaccount:team-a:deployer" cannot create resource "services" in API group "" in the namespace "team-a"`)
	r := &Runner{Name: "web", Identity: Identity{Namespace: "team-a", ServiceAccount: "deployer"}}
	e := r.permissionDenied(helmError(fmt.Errorf("failed to create resource: %w", rbac), status.ReasonInstallError, status.ActionInstall, "Install of release web failed"))
	if e.Reason != status.ReasonPermissionDenied || e.StalledReason != "" {
		t.Errorf("reason %q stalled %q, want PermissionDenied, retried", e.Reason, e.StalledReason)
	}
	if e.Refused {
		t.Error("a denial during the action is Refused: the action ran, and may have written a revision")
	}
	want := "Install of release web failed: the API server refused it: ServiceAccount team-a/deployer may not: create services (in team-a)"
	if e.Error() != want {
		t.Errorf("message\n %q\nwant\n %q", e.Error(), want)
	}
	cluster := errors.New(`clusterroles.rbac.authorization.k8s.io "x" is forbidden: User "op" cannot patch resource "clusterroles" in API group "rbac.authorization.k8s.io" at the cluster scope`)
	if user, got := forbidden(cluster); user != "op" || len(got) != 1 || got[0] != (Permission{Verb: "patch", Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}) {
		t.Errorf("cluster-scoped denial read as %q %+v", user, got)
	}
	// Refused as someone else than the identity meant to act: named.
	other := errors.New(`services "web" is forbidden: User "system:serviceaccount:ops:operator" cannot create resource "services" in API group "" in the namespace "team-a"`)
	e = r.permissionDenied(helmError(other, status.ReasonInstallError, status.ActionInstall, "Install of release web failed"))
	if want := "Install of release web failed: the API server refused it: user system:serviceaccount:ops:operator may not: create services (in team-a)"; e.Error() != want {
		t.Errorf("message\n %q\nwant\n %q", e.Error(), want)
	}
	// A policy judging the object's content is no missing permission.
	admission := errors.New(`deployments.apps "web" is forbidden: ValidatingAdmissionPolicy 'deny' with binding 'deny' denied request: 13 replicas are not allowed`)
	if e := r.permissionDenied(helmError(admission, status.ReasonUpgradeError, status.ActionUpgrade, "Upgrade failed")); e.Reason != status.ReasonUpgradeError {
		t.Errorf("an admission denial became %s", e.Reason)
	}
}

func TestIdentityPolicy(t *testing.T) {
	obj := func(ann map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetNamespace("team-a")
		u.SetName("web")
		u.SetAnnotations(ann)
		return u
	}
	tests := []struct {
		name        string
		policy      IdentityPolicy
		ann         map[string]string
		want        Identity
		wantStalled string
	}{
		// ServiceAccounts switched on (Allow, --service-accounts) unless
		// the case says off.
		{name: "unset: the operator's own", want: Identity{Namespace: "team-a"}},
		{name: "the watch's", policy: IdentityPolicy{ServiceAccount: "deployer", Source: SourceWatch, Allow: true},
			want: Identity{Namespace: "team-a", ServiceAccount: "deployer", Source: SourceWatch}},
		{name: "the annotation wins", policy: IdentityPolicy{ServiceAccount: "deployer", Source: SourceFlag, Allow: true},
			ann: map[string]string{AnnotationServiceAccount: "mine"}, want: Identity{Namespace: "team-a", ServiceAccount: "mine", Source: SourceAnnotation}},
		{name: "the annotation without a default", policy: IdentityPolicy{Allow: true}, ann: map[string]string{AnnotationServiceAccount: "mine"},
			want: Identity{Namespace: "team-a", ServiceAccount: "mine", Source: SourceAnnotation}},
		{name: "required and none", policy: IdentityPolicy{Require: true, Allow: true}, wantStalled: status.ReasonServiceAccountRequired},
		{name: "required and annotated", policy: IdentityPolicy{Require: true, Allow: true}, ann: map[string]string{AnnotationServiceAccount: "mine"},
			want: Identity{Namespace: "team-a", ServiceAccount: "mine", Source: SourceAnnotation}},
		{name: "not a name", policy: IdentityPolicy{Allow: true}, ann: map[string]string{AnnotationServiceAccount: "Not_A_Name"}, wantStalled: status.ReasonInvalidAnnotation},
		{name: "off: the annotation is refused", ann: map[string]string{AnnotationServiceAccount: "mine"}, wantStalled: status.ReasonServiceAccountsDisabled},
		{name: "off: the watch's is refused", policy: IdentityPolicy{ServiceAccount: "deployer", Source: SourceWatch}, wantStalled: status.ReasonServiceAccountsDisabled},
		{name: "off: an invalid annotation is still invalid", ann: map[string]string{AnnotationServiceAccount: "Not_A_Name"}, wantStalled: status.ReasonInvalidAnnotation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := tt.policy.For(obj(tt.ann))
			if tt.wantStalled != "" {
				if !IsStalledBy(err, tt.wantStalled) {
					t.Fatalf("error %v, want one stalled with %s", err, tt.wantStalled)
				}
				return
			}
			if err != nil || id != tt.want {
				t.Errorf("got %+v, %v; want %+v", id, err, tt.want)
			}
		})
	}
	if u := (Identity{Namespace: "team-a", ServiceAccount: "deployer"}).UserName(); u != "system:serviceaccount:team-a:deployer" {
		t.Errorf("user name %q", u)
	}
}
