package release

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/helmapp/helm-app-operator/internal/readiness"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// Permission is one request an action makes of the API server: a verb on a
// resource (of a group) in a namespace ("" for cluster-scoped resources),
// on the object Name when set (a reference of valuesFrom), else on any.
type Permission struct {
	Verb, Group, Resource, Namespace, Name string
}

// What names the verb and the resource: "create deployments.apps", "get
// secrets/db".
func (p Permission) What() string {
	w := p.Verb + " " + p.Resource
	if p.Group != "" {
		w += "." + p.Group
	}
	if p.Name != "" {
		w += "/" + p.Name
	}
	return w
}

// Reviewer asks the API server whether an identity may do each of perms,
// as the authorizers it runs (RBAC, webhooks) judge. Answers may be cached
// for a short time.
type Reviewer interface {
	Review(ctx context.Context, id Identity, perms []Permission) (allowed []bool, err error)
}

// The verbs each object needs of an action (Helm v3.21): an install reads
// every object (its conflict check) and creates it; an upgrade reads every
// object, patches those of the deployed revision and creates the others,
// and deletes those the new manifest drops; a hook is deleted by its policy
// (before-hook-creation by default), waited for by reading, created, and a
// Job or Pod hook is watched until done.
var (
	newObjectVerbs = []string{"create", "get"}
	oldObjectVerbs = []string{"get", "patch"}
	hookVerbs      = []string{"create", "delete", "get"}
	hookWatched    = []string{"list", "watch"}
)

// preflight checks, before an install or upgrade, that r.Identity may do
// what the action will do with the chart as rendered (r.render): read every
// object, create the new ones, patch those before's deployed revision has,
// delete those an upgrade drops, and what the action's hooks need. It returns nil when
// every permission is granted, or when the check cannot be made here (no
// Reviewer, a chart that does not render: Helm then reports its own error);
// otherwise an *Error with reason PermissionDenied naming each missing
// permission once, and no Helm action runs.
func (r *Runner) preflight(ctx context.Context, act string, before State, rendered *rendering, disableHooks bool) error {
	if r.Access == nil || r.Kube == nil || rendered == nil {
		return nil
	}
	objs, hooks := rendered.objs, rendered.hooks
	events := map[string][]helmrelease.HookEvent{
		status.ActionInstall: {helmrelease.HookPreInstall, helmrelease.HookPostInstall},
		status.ActionUpgrade: {helmrelease.HookPreUpgrade, helmrelease.HookPostUpgrade},
	}[act]
	if act == status.ActionInstall && before.Latest != nil && !isUninstalled(before.Latest) {
		// A failed install is installed again by an upgrade (install.go).
		events = []helmrelease.HookEvent{helmrelease.HookPreUpgrade, helmrelease.HookPostUpgrade}
	}
	var perms []Permission
	add := func(u *unstructured.Unstructured, verbs ...string) {
		if p, ok := r.permission(u); ok {
			for _, v := range verbs {
				p.Verb = v
				perms = append(perms, p)
			}
		}
	}
	// What an upgrade starts from: the deployed revision, else the failed
	// install it upgrades over.
	var prev []*unstructured.Unstructured
	if base := before.Deployed; act == status.ActionUpgrade && base != nil {
		prev, _ = manifestObjects(base.Manifest, r.Namespace, r.Kube)
	} else if base := before.Latest; act == status.ActionInstall && base != nil && !isUninstalled(base) {
		prev, _ = manifestObjects(base.Manifest, r.Namespace, r.Kube)
	}
	had := map[string]bool{}
	for _, u := range prev {
		had[objectKey(u)] = true
	}
	keep := map[string]bool{}
	for _, u := range objs {
		keep[objectKey(u)] = true
		if had[objectKey(u)] {
			add(u, oldObjectVerbs...)
		} else {
			add(u, newObjectVerbs...)
		}
		if r.Options.UpgradeForce && act == status.ActionUpgrade {
			add(u, "update")
		}
	}
	for _, u := range prev {
		if !keep[objectKey(u)] {
			add(u, "delete")
		}
	}
	if !disableHooks {
		for _, h := range hooks {
			if !slices.ContainsFunc(h.Events, func(e helmrelease.HookEvent) bool { return slices.Contains(events, e) }) {
				continue
			}
			hobjs, err := manifestObjects(h.Manifest, r.Namespace, r.Kube)
			if err != nil {
				continue
			}
			for _, u := range hobjs {
				add(u, hookVerbs...)
				if g := u.GroupVersionKind().GroupKind(); g == (schema.GroupKind{Group: "batch", Kind: "Job"}) || g == (schema.GroupKind{Kind: "Pod"}) {
					add(u, hookWatched...)
				}
			}
		}
	}
	return r.check(ctx, act, perms)
}

// check asks whether r.Identity may do each of perms, and returns the
// PermissionDenied failure of act that names those it may not.
func (r *Runner) check(ctx context.Context, act string, perms []Permission) error {
	perms = uniquePermissions(perms)
	if len(perms) == 0 {
		return nil
	}
	allowed, err := r.Access.Review(ctx, r.Identity, perms)
	if err != nil {
		// Not a verdict on the release: no Helm action was attempted.
		return &Error{Reason: status.ReasonReconcileError,
			Summary: fmt.Sprintf("Checking the permissions of release %s before its %s failed (%s)", r.Name, act, r.Identity), Err: err}
	}
	var denied []Permission
	for i, p := range perms {
		if !allowed[i] {
			denied = append(denied, p)
		}
	}
	if len(denied) == 0 {
		return nil
	}
	return r.denied(ctx, act, denied)
}

// denied is the failure of act for the permissions r.Identity lacks; when
// the identity is a ServiceAccount that does not exist, that is the failure.
// Either is Refused: the action did not run, and nothing was written.
func (r *Runner) denied(ctx context.Context, act string, denied []Permission) error {
	if r.KubeReader != nil {
		if st, err := LookUpServiceAccount(ctx, r.KubeReader, r.Identity); err == nil && st.Missing {
			e := ServiceAccountMissing(r.Identity, act)
			e.Refused = true
			return e
		}
	}
	return &Error{Reason: status.ReasonPermissionDenied, Action: act, Refused: true,
		Summary: DeniedMessage(r.Identity, denied) + r.grantHint()}
}

// grantHint says how to end the denial. The promise holds: a refused
// action is retried with the backoff, without bound, and at once when a
// Role or RoleBinding of the namespace changes (package reconciler).
func (r *Runner) grantHint() string {
	if r.Identity.Impersonated() {
		return "; grant them with a Role bound to it, and the release is retried"
	}
	return "; grant them to the operator's ServiceAccount, or (with --service-accounts on) name a ServiceAccount that has them with the annotation " + AnnotationServiceAccount
}

// DeniedMessage says, in one line, what id may not do, each permission once,
// grouped by namespace: "ServiceAccount team-a/deployer may not: create
// deployments.apps, create services, get configmaps (in team-a)".
func DeniedMessage(id Identity, denied []Permission) string {
	denied = uniquePermissions(denied)
	slices.SortFunc(denied, func(a, b Permission) int {
		if a.Namespace != b.Namespace {
			// Namespaced before cluster-scoped.
			if a.Namespace == "" || b.Namespace == "" {
				return strings.Compare(b.Namespace, a.Namespace)
			}
			return strings.Compare(a.Namespace, b.Namespace)
		}
		if a.Verb != b.Verb {
			return strings.Compare(a.Verb, b.Verb)
		}
		return strings.Compare(a.What(), b.What())
	})
	var groups []string
	for i := 0; i < len(denied); {
		j := i
		var whats []string
		for ; j < len(denied) && denied[j].Namespace == denied[i].Namespace; j++ {
			whats = append(whats, denied[j].What())
		}
		where := "(cluster-wide)"
		if ns := denied[i].Namespace; ns != "" {
			where = "(in " + ns + ")"
		}
		groups = append(groups, strings.Join(whats, ", ")+" "+where)
		i = j
	}
	return id.String() + " may not: " + strings.Join(groups, "; ")
}

// permission maps u to the resource the API server knows it by; false for
// a kind it does not serve (Helm then fails with its own error).
func (r *Runner) permission(u *unstructured.Unstructured) (Permission, bool) {
	gvk := u.GroupVersionKind()
	m, err := r.Kube.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return Permission{}, false
	}
	p := Permission{Group: m.Resource.Group, Resource: m.Resource.Resource}
	if m.Scope.Name() == "namespace" {
		p.Namespace = u.GetNamespace()
		if p.Namespace == "" {
			p.Namespace = r.Namespace
		}
	}
	return p, true
}

// rendering is the chart rendered as an action will render it (render).
type rendering struct {
	// objs are the manifest's objects, hooks the hooks.
	objs  []*unstructured.Unstructured
	hooks []*helmrelease.Hook
	// scoped are the objects of the manifest and of every hook, each with
	// its template, for the scope check.
	scoped []ScopedObject
	// files are the rendered templates by name (NOTES.txt aside), for
	// telling a chart that renders differently on each run (render.go).
	files map[string]string
}

// render renders the chart with vals as Helm's action will, without
// contacting the API server (the capabilities are those of the action's
// configuration; a lookup finds nothing), and returns the manifest's
// objects and the hooks.
func (r *Runner) render(vals map[string]any, upgrade bool) (*rendering, error) {
	caps := chartutil.DefaultCapabilities
	if cfg := r.Client.Config(); cfg != nil && cfg.Capabilities != nil {
		caps = cfg.Capabilities
	}
	chrt := r.Chart
	if len(chrt.Dependencies()) > 0 {
		// Helm drops the dependencies the values disable from the chart it
		// is given; the watch's chart is shared, so a copy is.
		chrt = copyChart(chrt)
		if err := chartutil.ProcessDependenciesWithMerge(chrt, vals); err != nil {
			return nil, err
		}
	}
	opts := chartutil.ReleaseOptions{Name: r.Name, Namespace: r.Namespace, Revision: 1, IsInstall: !upgrade, IsUpgrade: upgrade}
	rv, err := chartutil.ToRenderValues(chrt, vals, opts, caps)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(chrt, rv)
	if err != nil {
		return nil, err
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return nil, err
	}
	var mapper meta.RESTMapper
	if r.Kube != nil {
		mapper = r.Kube.RESTMapper()
	}
	out := &rendering{hooks: hooks, files: files}
	// Each template's documents apart, so that each object keeps its
	// template; a document injected by a value is its template's too.
	for _, m := range manifests {
		objs, err := readiness.DecodeManifest(m.Content, r.Namespace, mapper)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", m.Name, err)
		}
		for _, u := range objs {
			normalizeSecret(u)
			out.objs = append(out.objs, u)
			out.scoped = append(out.scoped, scopedObject(u, m.Name))
		}
	}
	for _, h := range hooks {
		objs, err := DocumentObjects(h.Manifest, h.Path, r.Namespace, mapper)
		if err != nil {
			return nil, err
		}
		out.scoped = append(out.scoped, objs...)
	}
	return out, nil
}

// renderedInScope checks the objects and hooks the chart rendered against
// the watch's scope before the action act runs: Helm does not post-render
// hooks, so a hook injected by a value would escape the post-renderer's
// check; a manifest out of scope is refused here as well, before the CRDs
// are applied or the permissions asked.
func (r *Runner) renderedInScope(act string, rendered *rendering) error {
	if rendered == nil {
		return nil
	}
	if strays := r.Scope.Strays(rendered.scoped, r.Name, r.Namespace); len(strays) > 0 {
		return RenderedOutOfScope(act, r.Name, r.Namespace, strays)
	}
	return nil
}

// copyChart copies c and its dependencies as deep as Helm's dependency
// processing writes (the chart's dependency list and the metadata's
// dependencies); templates, values and files are shared, read only.
func copyChart(c *chart.Chart) *chart.Chart {
	n := *c
	if c.Metadata != nil {
		md := *c.Metadata
		md.Dependencies = nil
		for _, d := range c.Metadata.Dependencies {
			dc := *d
			md.Dependencies = append(md.Dependencies, &dc)
		}
		n.Metadata = &md
	}
	var deps []*chart.Chart
	for _, d := range c.Dependencies() {
		deps = append(deps, copyChart(d))
	}
	n.SetDependencies(deps...)
	return &n
}

func isUninstalled(rel *helmrelease.Release) bool {
	return rel.Info == nil || rel.Info.Status == helmrelease.StatusUninstalled
}

func objectKey(u *unstructured.Unstructured) string {
	gk := u.GroupVersionKind().GroupKind()
	return gk.String() + "/" + u.GetNamespace() + "/" + u.GetName()
}

func uniquePermissions(perms []Permission) []Permission {
	seen := map[Permission]bool{}
	var out []Permission
	for _, p := range perms {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// forbiddenRE matches the API server's authorization denial: `User "..."
// cannot create resource "services" in API group "" in the namespace "ns"`.
var forbiddenRE = regexp.MustCompile(`User "([^"]*)" cannot (\S+) resource "([^"]+)" in API group "([^"]*)"(?: in the namespace "([^"]+)")?`)

// forbidden returns the user an error of the API server's authorizers
// names and the permissions it says that user lacks; none when err is no
// such denial. A denial by admission (a policy or webhook judging the
// object's content) is not a missing permission, and is left to the
// action's own reason.
func forbidden(err error) (user string, perms []Permission) {
	if err == nil {
		return "", nil
	}
	for _, m := range forbiddenRE.FindAllStringSubmatch(err.Error(), -1) {
		res, _, _ := strings.Cut(m[3], "/") // a subresource is named with its resource
		user = m[1]
		perms = append(perms, Permission{Verb: m[2], Resource: res, Group: m[4], Namespace: m[5]})
	}
	return user, uniquePermissions(perms)
}

// permissionDenied reclassifies e, a failed action, as PermissionDenied when
// the API server refused it for a missing permission, naming them.
func (r *Runner) permissionDenied(e *Error) *Error {
	user, perms := forbidden(e.Err)
	if len(perms) == 0 {
		return e
	}
	e.Reason = status.ReasonPermissionDenied
	e.StalledReason = ""
	msg := DeniedMessage(r.Identity, perms)
	if r.Identity.Impersonated() && user != r.Identity.UserName() {
		// Not who was meant to act: say who the API server saw.
		msg = fmt.Sprintf("user %s%s", user, strings.TrimPrefix(msg, r.Identity.String()))
	}
	e.Err = fmt.Errorf("the API server refused it: %s", msg)
	return e
}
