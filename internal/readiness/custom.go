package readiness

import (
	"context"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// subresourceRefresh is how long what discovery says of a kind's status
// subresource is trusted: a CRD changes rarely, and the steady state then
// costs no request.
const subresourceRefresh = 10 * time.Minute

// builtinGroups are the API groups Kubernetes serves itself (with the
// dotless ones: "", apps, batch, autoscaling, policy): their kinds are not
// custom resources, and a status left empty by their controllers (an
// admission policy's, a PodDisruptionBudget's) is kstatus' to judge. A
// CRD's group always has a dot; one of these it cannot have without the
// API review Kubernetes' own groups go through.
var builtinGroups = map[string]bool{
	"admissionregistration.k8s.io": true, "apiextensions.k8s.io": true, "apiregistration.k8s.io": true,
	"authentication.k8s.io": true, "authorization.k8s.io": true, "certificates.k8s.io": true,
	"coordination.k8s.io": true, "discovery.k8s.io": true, "events.k8s.io": true,
	"flowcontrol.apiserver.k8s.io": true, "internal.apiserver.k8s.io": true, "networking.k8s.io": true,
	"node.k8s.io": true, "rbac.authorization.k8s.io": true, "resource.k8s.io": true,
	"scheduling.k8s.io": true, "storage.k8s.io": true, "storagemigration.k8s.io": true,
	"metrics.k8s.io": true, "custom.metrics.k8s.io": true, "external.metrics.k8s.io": true,
}

// StatusSubresources remembers, per kind, whether it is a custom resource
// served with a status subresource, for the process: kstatus calls such an
// object Current while it has no status at all, before its controller has
// acted on it (or with no controller installed), and Checker says
// NoStatusReported instead. It asks discovery (`<resource>/status` in the
// group version's resource list), which every identity may read: no
// permission on CRDs is needed. Safe for concurrent use.
type StatusSubresources struct {
	// Mapper gives a kind's resource (its plural); Discovery lists the
	// resources of its group version.
	Mapper    meta.RESTMapper
	Discovery discovery.DiscoveryInterface

	mu    sync.Mutex
	kinds map[schema.GroupVersionKind]subresourceMemo
}

type subresourceMemo struct {
	has   bool
	until time.Time
}

// NewStatusSubresources returns an empty memo over mapper and dc.
func NewStatusSubresources(mapper meta.RESTMapper, dc discovery.DiscoveryInterface) *StatusSubresources {
	return &StatusSubresources{Mapper: mapper, Discovery: dc, kinds: map[schema.GroupVersionKind]subresourceMemo{}}
}

// has reports whether gvk is a custom resource served with a status
// subresource, asking discovery for gvk's group version (one GET) only
// when the memo holds no current answer. A built-in group costs nothing; a
// failure of discovery (an aggregated API that is down) answers false,
// remembered like an answer.
func (s *StatusSubresources) has(ctx context.Context, gvk schema.GroupVersionKind, now time.Time) bool {
	if s == nil || !strings.Contains(gvk.Group, ".") || builtinGroups[gvk.Group] {
		return false
	}
	s.mu.Lock()
	m, ok := s.kinds[gvk]
	s.mu.Unlock()
	if ok && now.Before(m.until) {
		return m.has
	}
	m = subresourceMemo{until: now.Add(subresourceRefresh)}
	mapping, err := s.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	var list *metav1.APIResourceList
	if err == nil {
		list, err = s.Discovery.ServerResourcesForGroupVersion(gvk.GroupVersion().String())
	}
	if err != nil {
		logf.FromContext(ctx).V(1).Info("discovering a kind's subresources failed: its objects without a status are taken as Current", "kind", gvk.String(), "error", err.Error())
	} else {
		for _, r := range list.APIResources {
			m.has = m.has || r.Name == mapping.Resource.Resource+"/status"
		}
	}
	s.mu.Lock()
	s.kinds[gvk] = m
	s.mu.Unlock()
	return m.has
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
	if !c.Subresources.has(ctx, u.GroupVersionKind(), now) {
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
