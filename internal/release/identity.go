package release

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// AnnotationServiceAccount names a ServiceAccount of the resource's own
// namespace that every Helm action of its release acts as. It wins over the
// watch's serviceAccount and --default-service-account.
const AnnotationServiceAccount = "helmapp.io/service-account"

// Where an Identity's ServiceAccount was named, for messages.
const (
	SourceAnnotation = "the annotation " + AnnotationServiceAccount
	SourceWatch      = "the watch's serviceAccount"
	SourceFlag       = "--default-service-account"
)

// Identity is who writes a release's objects: a ServiceAccount of the
// resource's namespace, impersonated, or, when ServiceAccount is empty, the
// operator itself. Helm's storage, the resource and its status, events and
// every read for readiness and drift stay the operator's whatever it is.
type Identity struct {
	// Namespace and ServiceAccount name the ServiceAccount; ServiceAccount
	// is empty for the operator's own identity.
	Namespace, ServiceAccount string
	// Source says where the name came from (SourceAnnotation, ...).
	Source string
}

// Impersonated tells whether the identity is a ServiceAccount rather than
// the operator's own.
func (id Identity) Impersonated() bool { return id.ServiceAccount != "" }

// UserName is the user the API server sees: system:serviceaccount:<ns>:<name>;
// empty for the operator's own identity.
func (id Identity) UserName() string {
	if !id.Impersonated() {
		return ""
	}
	return "system:serviceaccount:" + id.Namespace + ":" + id.ServiceAccount
}

// String names the identity in messages: "ServiceAccount team-a/deployer" or
// "The operator's own identity".
func (id Identity) String() string {
	if !id.Impersonated() {
		return "The operator's own identity"
	}
	return "ServiceAccount " + id.Namespace + "/" + id.ServiceAccount
}

// IdentityPolicy is how the identity of a watch's resources is chosen.
type IdentityPolicy struct {
	// ServiceAccount is the watch's serviceAccount or, when it sets none,
	// --default-service-account; empty for none. Source says which.
	ServiceAccount, Source string
	// Require refuses to act for a resource that has no ServiceAccount
	// (--require-service-account).
	Require bool
	// Allow switches per-resource ServiceAccounts on (--service-accounts
	// allowed or required). Without it the operator impersonates no one (its
	// default Role grants no impersonate): a resource or watch that names a
	// ServiceAccount is refused with ServiceAccountsDisabled, decided from
	// this configuration alone, without asking the API server.
	Allow bool
}

// For returns the identity obj's release acts as: the ServiceAccount its
// annotation names, else the policy's, else the operator's own. With
// Require and no ServiceAccount it returns an *Error stalled with
// ServiceAccountRequired; an annotation that cannot name a ServiceAccount is
// stalled with InvalidAnnotation; a ServiceAccount named while the policy
// does not Allow them is stalled with ServiceAccountsDisabled.
func (p IdentityPolicy) For(obj client.Object) (Identity, error) {
	id := Identity{Namespace: obj.GetNamespace(), ServiceAccount: p.ServiceAccount, Source: p.Source}
	if v, ok := obj.GetAnnotations()[AnnotationServiceAccount]; ok && v != "" {
		if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
			return Identity{}, &Error{Reason: status.ReasonInvalidAnnotation, StalledReason: status.ReasonInvalidAnnotation,
				Summary: fmt.Sprintf("The annotation %s has the value %q, which is not a ServiceAccount name: %s", AnnotationServiceAccount, v, errs[0])}
		}
		id.ServiceAccount, id.Source = v, SourceAnnotation
	}
	if id.Impersonated() && !p.Allow {
		return Identity{}, &Error{Reason: status.ReasonServiceAccountsDisabled, StalledReason: status.ReasonServiceAccountsDisabled,
			Summary: fmt.Sprintf("%s names %s, but the operator runs without per-resource ServiceAccounts (--service-accounts=off) and acts only as itself: "+
				"remove the name, or run the operator with --service-accounts=allowed and a Role that grants impersonate on serviceaccounts (docs/tenancy.md)",
				capitalize(id.Source), id)}
	}
	if !id.Impersonated() {
		id.Source = ""
		if p.Require {
			return Identity{}, &Error{Reason: status.ReasonServiceAccountRequired, StalledReason: status.ReasonServiceAccountRequired,
				Summary: fmt.Sprintf("The operator acts only as a ServiceAccount of the resource's namespace (--require-service-account), and none is named: "+
					"set the annotation %s to a ServiceAccount of namespace %s that may manage the chart's objects", AnnotationServiceAccount, obj.GetNamespace())}
		}
	}
	return id, nil
}

// ServiceAccountState is what the API server says of an identity's
// ServiceAccount and of its namespace.
type ServiceAccountState struct {
	// Missing: the ServiceAccount does not exist.
	Missing bool
	// NamespaceTerminating: its namespace is being deleted (or gone).
	NamespaceTerminating bool
}

// LookUpServiceAccount reads, with the operator's own reader, whether the
// identity's ServiceAccount exists and whether its namespace is being
// deleted. The operator's own identity always exists.
func LookUpServiceAccount(ctx context.Context, reader client.Reader, id Identity) (ServiceAccountState, error) {
	if !id.Impersonated() {
		return ServiceAccountState{}, nil
	}
	sa := &metav1.PartialObjectMetadata{}
	sa.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ServiceAccount"))
	err := reader.Get(ctx, client.ObjectKey{Namespace: id.Namespace, Name: id.ServiceAccount}, sa)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return ServiceAccountState{}, fmt.Errorf("reading %s: %w", id, err)
	default:
		return ServiceAccountState{}, nil
	}
	st := ServiceAccountState{Missing: true}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	err = reader.Get(ctx, client.ObjectKey{Name: id.Namespace}, ns)
	switch {
	case apierrors.IsNotFound(err):
		st.NamespaceTerminating = true
	case err != nil:
		return st, fmt.Errorf("reading namespace %s: %w", id.Namespace, err)
	default:
		st.NamespaceTerminating = !ns.GetDeletionTimestamp().IsZero()
	}
	return st, nil
}

// ServiceAccountMissing is the failure of acting as a ServiceAccount that
// does not exist: reason ServiceAccountNotFound for an install, upgrade or
// re-apply (act), UninstallError for an uninstall.
func ServiceAccountMissing(id Identity, act string) *Error {
	reason := status.ReasonServiceAccountNotFound
	if act == status.ActionUninstall {
		reason = status.ReasonUninstallError
	}
	return &Error{Reason: reason, Action: act,
		Summary: fmt.Sprintf("%s, named by %s, does not exist: create it, or name another with the annotation %s; the release's objects are written as it",
			id, id.Source, AnnotationServiceAccount)}
}

// IsIdentityRefused tells whether err is the refusal of For to pick an
// identity for a resource whose configuration is otherwise valid
// (ServiceAccountRequired, ServiceAccountsDisabled): the resource's runner
// may still read Helm's storage as the operator, which its deletion needs.
func IsIdentityRefused(err error) bool {
	return IsStalledBy(err, status.ReasonServiceAccountRequired) || IsStalledBy(err, status.ReasonServiceAccountsDisabled)
}

// capitalize upper-cases the first letter of an ASCII source ("the
// annotation ..." starts a sentence).
func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// IsStalledBy tells whether err is an *Error stalled with reason.
func IsStalledBy(err error, reason string) bool {
	var e *Error
	return errors.As(err, &e) && e.StalledReason == reason
}

// IsReason tells whether err is an *Error with reason.
func IsReason(err error, reason string) bool {
	var e *Error
	return errors.As(err, &e) && e.Reason == reason
}
