package operator

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/sync/singleflight"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/release"
	"github.com/helmapp/helm-app-operator/internal/watches"
)

// How long an answer of the API server's authorizers is reused. A grant is
// remembered a minute (a permission revoked meanwhile makes the action fail
// with the API server's own denial, which is reported as PermissionDenied
// too); a denial only a few seconds, so that a permission granted is seen
// by the next retry.
const (
	allowedTTL = time.Minute
	deniedTTL  = 3 * time.Second
)

// identities gives each watched kind its identity policy (the watch's
// serviceAccount, else --default-service-account, --require-service-account
// and whether --service-accounts switches them on) and builds what acts as
// each identity: the REST configuration of its Helm actions and the client
// of its re-applies.
type identities struct {
	base     *rest.Config
	scheme   *runtime.Scheme
	mapper   meta.RESTMapper
	policies map[schema.GroupVersionKind]release.IdentityPolicy

	// writers holds a client per ServiceAccount, at most maxIdentities.
	writers *bounded[string, client.Client]
}

func newIdentities(base *rest.Config, scheme *runtime.Scheme, mapper meta.RESTMapper, c Config, ws []watches.Watch) *identities {
	ids := &identities{base: base, scheme: scheme, mapper: mapper,
		policies: map[schema.GroupVersionKind]release.IdentityPolicy{}, writers: newBounded[string, client.Client](maxIdentities)}
	for _, w := range ws {
		ids.policies[w.GroupVersionKind] = policyOf(w, c)
	}
	return ids
}

// policyOf is the identity policy of the resources of w. Whether
// ServiceAccounts are allowed is configuration (c.ServiceAccounts), never a
// question to the API server: a resource that names one while they are off
// is refused without a request.
func policyOf(w watches.Watch, c Config) release.IdentityPolicy {
	p := release.IdentityPolicy{Require: c.RequireServiceAccount, Allow: c.ServiceAccounts}
	switch {
	case w.ServiceAccount != "":
		p.ServiceAccount, p.Source = w.ServiceAccount, release.SourceWatch
	case c.DefaultServiceAccount != "":
		p.ServiceAccount, p.Source = c.DefaultServiceAccount, release.SourceFlag
	}
	return p
}

// restConfig is the REST configuration of obj's Helm actions (not of their
// storage, which stays the operator's): the operator's own, impersonating
// the ServiceAccount obj's identity names. A resource that has none, with
// --require-service-account, gets the operator's own configuration here:
// the reconciler refuses to act for it (ServiceAccountRequired) and only
// reads Helm's storage.
func (ids *identities) restConfig(_ context.Context, obj client.Object, base *rest.Config) (*rest.Config, error) {
	cfg := rest.CopyConfig(base)
	id, err := ids.policies[obj.GetObjectKind().GroupVersionKind()].For(obj)
	if err != nil || !id.Impersonated() {
		return cfg, nil
	}
	impersonate(cfg, id)
	return cfg, nil
}

// impersonate makes cfg act as id. Only the user is named: the API server
// gives an impersonated ServiceAccount the groups its tokens carry, and the
// operator needs no right to impersonate groups.
func impersonate(cfg *rest.Config, id release.Identity) {
	cfg.Impersonate = rest.ImpersonationConfig{UserName: id.UserName()}
}

// writer returns the client that writes the objects a re-apply restores as
// id; one per ServiceAccount, built once while it is among the
// maxIdentities used most recently.
func (ids *identities) writer(id release.Identity) (client.Client, error) {
	return ids.writers.getOrMake(id.UserName(), func() (client.Client, error) {
		cfg := rest.CopyConfig(ids.base)
		impersonate(cfg, id)
		c, err := client.New(cfg, client.Options{Scheme: ids.scheme, Mapper: ids.mapper})
		if err != nil {
			return nil, fmt.Errorf("creating the client of %s: %w", id, err)
		}
		return c, nil
	})
}

// accessReviewer asks the API server, with a SelfSubjectAccessReview made
// as the identity itself (impersonated, or the operator), whether it may do
// what an action needs: every authorizer the API server runs answers, RBAC
// and webhooks alike, and the operator needs no right to review others.
// Answers are cached per identity for a short time, and concurrent
// questions share one request, so a burst of installs in a namespace makes
// one review per (identity, verb, resource, namespace).
type accessReviewer struct {
	base       *rest.Config
	httpClient *http.Client
	now        func() time.Time

	// clients holds a review client per identity, at most maxIdentities;
	// answers the answers, at most maxAnswers (an expired one is asked
	// again).
	clients *bounded[string, authzclient.SelfSubjectAccessReviewInterface]
	answers *bounded[accessKey, answer]
	flight  singleflight.Group
}

type accessKey struct {
	user string
	perm release.Permission
}

type answer struct {
	allowed bool
	until   time.Time
}

func newAccessReviewer(base *rest.Config, httpClient *http.Client, now func() time.Time) *accessReviewer {
	return &accessReviewer{base: base, httpClient: httpClient, now: now,
		clients: newBounded[string, authzclient.SelfSubjectAccessReviewInterface](maxIdentities),
		answers: newBounded[accessKey, answer](maxAnswers)}
}

// Review implements release.Reviewer.
func (a *accessReviewer) Review(ctx context.Context, id release.Identity, perms []release.Permission) ([]bool, error) {
	out := make([]bool, len(perms))
	for i, p := range perms {
		ok, err := a.review(ctx, id, p)
		if err != nil {
			return nil, err
		}
		out[i] = ok
	}
	return out, nil
}

func (a *accessReviewer) review(ctx context.Context, id release.Identity, p release.Permission) (bool, error) {
	key := accessKey{user: id.UserName(), perm: p}
	ans, ok := a.answers.get(key)
	if ok && a.now().Before(ans.until) {
		return ans.allowed, nil
	}
	v, err, _ := a.flight.Do(fmt.Sprintf("%s|%s|%s|%s|%s|%s", key.user, p.Verb, p.Group, p.Resource, p.Namespace, p.Name), func() (any, error) {
		c, err := a.client(id)
		if err != nil {
			return false, err
		}
		r, err := c.Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: p.Namespace, Verb: p.Verb, Group: p.Group, Resource: p.Resource, Name: p.Name}},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("asking whether %s may %s: %w", id, p.What(), err)
		}
		ttl := deniedTTL
		if r.Status.Allowed {
			ttl = allowedTTL
		}
		a.answers.put(key, answer{allowed: r.Status.Allowed, until: a.now().Add(ttl)})
		return r.Status.Allowed, nil
	})
	if err != nil {
		return false, err
	}
	return v.(bool), nil
}

// maxAnswers bounds the cache of answers; past it, the answer used least
// recently is dropped.
const maxAnswers = 4096

// client returns the SelfSubjectAccessReview client of id, built once
// while it is among the maxIdentities used most recently.
func (a *accessReviewer) client(id release.Identity) (authzclient.SelfSubjectAccessReviewInterface, error) {
	return a.clients.getOrMake(id.UserName(), func() (authzclient.SelfSubjectAccessReviewInterface, error) {
		cfg := rest.CopyConfig(a.base)
		hc := a.httpClient
		if id.Impersonated() {
			impersonate(cfg, id)
			var err error
			if hc, err = rest.HTTPClientFor(cfg); err != nil {
				return nil, err
			}
		}
		cs, err := authzclient.NewForConfigAndClient(cfg, hc)
		if err != nil {
			return nil, err
		}
		return cs.SelfSubjectAccessReviews(), nil
	})
}

// Values of --service-accounts.
const (
	// ServiceAccountsOff: the operator acts only as itself; its Role needs
	// no impersonate. The default.
	ServiceAccountsOff = "off"
	// ServiceAccountsAllowed: a resource (annotation), its watch or
	// --default-service-account may name a ServiceAccount to act as; the
	// others act as the operator.
	ServiceAccountsAllowed = "allowed"
	// ServiceAccountsRequired: every resource must act as a ServiceAccount
	// (--require-service-account).
	ServiceAccountsRequired = "required"
)

// SetServiceAccounts applies the value of --service-accounts to c.
// --require-service-account and --default-service-account switch
// ServiceAccounts on by themselves; an explicit "off" (given says the flag
// was on the command line) beside either contradicts them and is an error,
// as is any other value.
func SetServiceAccounts(c *Config, mode string, given bool) error {
	switch mode {
	case ServiceAccountsOff:
		if given && (c.RequireServiceAccount || c.DefaultServiceAccount != "") {
			return fmt.Errorf("--service-accounts=off contradicts --require-service-account and --default-service-account, which act as ServiceAccounts")
		}
	case ServiceAccountsAllowed:
		c.ServiceAccounts = true
	case ServiceAccountsRequired:
		c.ServiceAccounts, c.RequireServiceAccount = true, true
	default:
		return fmt.Errorf("--service-accounts must be %s, %s or %s, got %q", ServiceAccountsOff, ServiceAccountsAllowed, ServiceAccountsRequired, mode)
	}
	return nil
}
