package readiness

import (
	"context"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// subresourceRefresh is how long what a CRD says of its status subresource
// is trusted: a CRD changes rarely, and the steady state then costs no
// request.
const subresourceRefresh = 10 * time.Minute

// StatusSubresources remembers, per kind, whether it is a custom resource
// whose CRD declares a status subresource, for the process: kstatus calls
// such an object Current while it has no status at all, before its
// controller has acted on it (or with no controller installed), and
// Checker says NoStatusReported instead. Safe for concurrent use.
type StatusSubresources struct {
	// Mapper gives a kind's resource (its plural), which names its CRD.
	Mapper meta.RESTMapper

	mu    sync.Mutex
	kinds map[schema.GroupVersionKind]subresourceMemo
}

type subresourceMemo struct {
	has bool
	// until is when the answer is to be read again; zero: never (the kind
	// has no CRD: it is built in or served by an aggregated API).
	until time.Time
}

// NewStatusSubresources returns an empty memo over mapper.
func NewStatusSubresources(mapper meta.RESTMapper) *StatusSubresources {
	return &StatusSubresources{Mapper: mapper, kinds: map[schema.GroupVersionKind]subresourceMemo{}}
}

var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// has reports whether gvk's CRD declares a status subresource for gvk's
// version, reading the CRD (one GET through r) only when the memo does not
// hold a current answer. A kind of a group without a dot is built in (a
// CRD's group has one) and costs nothing; a failure to read the CRD
// (forbidden) answers false, remembered like an answer.
func (s *StatusSubresources) has(ctx context.Context, r client.Reader, gvk schema.GroupVersionKind, now time.Time) bool {
	if s == nil || !strings.Contains(gvk.Group, ".") {
		return false
	}
	s.mu.Lock()
	m, ok := s.kinds[gvk]
	s.mu.Unlock()
	if ok && (m.until.IsZero() || now.Before(m.until)) {
		return m.has
	}
	m = subresourceMemo{until: now.Add(subresourceRefresh)}
	mapping, err := s.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err == nil {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(crdGVK)
		err = r.Get(ctx, client.ObjectKey{Name: mapping.Resource.Resource + "." + gvk.Group}, crd)
		switch {
		case apierrors.IsNotFound(err):
			m.until = time.Time{}
		case err == nil:
			m.has = crdHasStatus(crd, gvk.Version)
		}
	}
	if err != nil && !apierrors.IsNotFound(err) {
		logf.FromContext(ctx).V(1).Info("reading a kind's CRD failed: its objects without a status are taken as Current", "kind", gvk.String(), "error", err.Error())
	}
	s.mu.Lock()
	s.kinds[gvk] = m
	s.mu.Unlock()
	return m.has
}

// crdHasStatus reports whether the CRD's version declares the status subresource.
func crdHasStatus(crd *unstructured.Unstructured, version string) bool {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, raw := range versions {
		v, _ := raw.(map[string]any)
		if name, _ := v["name"].(string); name != version {
			continue
		}
		_, found, _ := unstructured.NestedMap(v, "subresources", "status")
		return found
	}
	return false
}

// noStatusReported turns res, kstatus' Current for a custom resource that
// has reported nothing, into InProgress NoStatusReported when its CRD has a
// status subresource: the object's controller has not acted on it yet.
func (c Checker) noStatusReported(ctx context.Context, res *Result, u *unstructured.Unstructured, now time.Time) {
	if res.Status != kstatus.CurrentStatus || c.Subresources == nil {
		return
	}
	if st, ok := u.Object["status"].(map[string]any); ok && len(st) > 0 {
		return
	} else if !ok && u.Object["status"] != nil {
		return // a status of another shape is something reported
	}
	if !c.Subresources.has(ctx, c.Reader, u.GroupVersionKind(), now) {
		return
	}
	res.Status, res.Reason = kstatus.InProgressStatus, status.ReasonNoStatusReported
	res.Message = "no status reported yet: its controller has not acted on it"
}

// readyCondition is the object's own Ready condition when it is False or
// Unknown: the text "Ready=False <reason>: <message>" (the message marked
// foreign) and the condition's message as written; ok false when there is
// no such condition.
func readyCondition(u *unstructured.Unstructured) (text, message string, ok bool) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, raw := range conds {
		c, _ := raw.(map[string]any)
		if typ, _ := c["type"].(string); typ != "Ready" {
			continue
		}
		st, _ := c["status"].(string)
		if st != "False" && st != "Unknown" {
			return "", "", false
		}
		reason, _ := c["reason"].(string)
		message, _ = c["message"].(string)
		text = "Ready=" + st
		if reason != "" {
			text += " " + oneLine(reason)
		}
		if m := oneLine(message); m != "" {
			text += ": " + status.Foreign(m)
		}
		return text, message, true
	}
	return "", "", false
}
