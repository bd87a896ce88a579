package release

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/status"
)

// CRD policies of a watch (watches.yaml crds.install and crds.upgrade).
const (
	// CRDSkip leaves the chart's crds/ alone.
	CRDSkip = "Skip"
	// CRDCreate creates the chart's CRDs that are missing; existing ones are left as they are.
	CRDCreate = "Create"
	// CRDCreateReplace creates the missing ones and updates the existing
	// ones (server-side apply with the operator's field manager).
	CRDCreateReplace = "CreateReplace"
)

// CRDPolicy is what an install and an upgrade do with the chart's crds/.
// The zero value is Helm's own behaviour: Create on install, Skip on upgrade.
type CRDPolicy struct {
	Install, Upgrade string
}

// crdFieldManager is the field manager of the CRDs the operator applies.
const crdFieldManager = "helm-app-operator"

// crdEstablishTimeout bounds the wait for applied CRDs to be Established.
const crdEstablishTimeout = time.Minute

func (p CRDPolicy) forInstall() string {
	if p.Install == "" {
		return CRDCreate
	}
	return p.Install
}

func (p CRDPolicy) forUpgrade() string {
	if p.Upgrade == "" {
		return CRDSkip
	}
	return p.Upgrade
}

// applyCRDs applies the chart's CRDs by policy, before the action that
// follows (Helm's own handling of crds/ is turned off), waits until those it
// created or updated are Established, and returns their names. No policy
// deletes a CRD: one that left the chart stays.
//
// On failure it returns an *Error with reason CRDApplyError naming the CRD
// the API server refused.
func (r *Runner) applyCRDs(ctx context.Context, policy, act string) ([]string, error) {
	if policy == CRDSkip || r.Chart == nil {
		return nil, nil
	}
	var applied []string
	for _, c := range r.Chart.CRDObjects() {
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(string(c.File.Data)), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return applied, r.crdError(act, c.Filename, err)
			}
			if len(u.Object) == 0 || u.GetKind() != "CustomResourceDefinition" {
				continue
			}
			changed, err := r.applyCRD(ctx, u, policy)
			if err != nil {
				return applied, r.crdError(act, "CRD "+u.GetName(), err)
			}
			if changed {
				applied = append(applied, u.GetName())
				r.crdsApplied = append(r.crdsApplied, u.GetName())
			}
		}
	}
	for _, name := range applied {
		if err := r.waitEstablished(ctx, name); err != nil {
			return applied, r.crdError(act, "CRD "+name, err)
		}
	}
	return applied, nil
}

// applyCRD creates u, or with CreateReplace applies it over the existing
// CRD; it reports whether the CRD changed.
func (r *Runner) applyCRD(ctx context.Context, u *unstructured.Unstructured, policy string) (bool, error) {
	if policy == CRDCreateReplace {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(u.GroupVersionKind())
		before := ""
		if err := r.Kube.Get(ctx, client.ObjectKey{Name: u.GetName()}, live); err == nil {
			before = live.GetResourceVersion()
		}
		u.SetResourceVersion("")
		//nolint:staticcheck // server-side apply of an unstructured object
		if err := r.Kube.Patch(ctx, u, client.Apply, client.FieldOwner(crdFieldManager), client.ForceOwnership); err != nil {
			return false, err
		}
		// An apply that changed nothing leaves the resource version as it was.
		return u.GetResourceVersion() != before, nil
	}
	err := r.Kube.Create(ctx, u, client.FieldOwner(crdFieldManager))
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	return err == nil, err
}

// waitEstablished waits until the CRD name is Established.
func (r *Runner) waitEstablished(ctx context.Context, name string) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, crdEstablishTimeout, true, func(ctx context.Context) (bool, error) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apiextensions.k8s.io/v1")
		u.SetKind("CustomResourceDefinition")
		if err := r.Kube.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

func (r *Runner) crdError(act, what string, err error) *Error {
	verb := map[string]string{status.ActionInstall: "Install", status.ActionUpgrade: "Upgrade"}[act]
	return &Error{Reason: status.ReasonCRDApplyError, Action: act,
		Summary: fmt.Sprintf("%s of release %s failed: applying the chart's %s", verb, r.Name, what), Err: err}
}
