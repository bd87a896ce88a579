package reconciler_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
)

// crdChart writes version n of a chart whose crds/ holds the CRD things.<group>
// and whose template is a Thing: v1 has spec.a; v2 adds spec.b to the CRD and
// sets it; v3 serves the CRD at v2 only, dropping the stored version v1,
// which the API server refuses.
func crdChart(t *testing.T, group string, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "things")
	props := "              a: {type: string}\n"
	if n >= 2 {
		props += "              b: {type: string}\n"
	}
	version := "v1"
	if n == 3 {
		version = "v2"
	}
	thing := "  a: x\n"
	if n >= 2 {
		thing += "  b: bee\n"
	}
	files := map[string]string{
		"Chart.yaml": fmt.Sprintf("apiVersion: v2\nname: things\nversion: 0.%d.0\n", n),
		"crds/things.yaml": fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.%[1]s
spec:
  group: %[1]s
  names: {kind: Thing, listKind: ThingList, plural: things, singular: thing}
  scope: Namespaced
  versions:
  - name: %[2]s
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
%[3]s`, group, version, props),
		"templates/thing.yaml": fmt.Sprintf("apiVersion: %s/%s\nkind: Thing\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n%s", group, version, thing),
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A chart whose v2 adds a field to its CRD: with the default upgrade policy
// (Skip) the CRD is left as v1 made it and the field is dropped from the
// resource using it; with CreateReplace the CRD is updated (CRDsApplied) and
// the resource keeps the field. A v3 whose CRD update the API server refuses
// fails with CRDApplyError naming the CRD, before the upgrade; no policy
// deletes the CRD, not even the uninstall.
func TestCRDPolicy(t *testing.T) {
	for _, policy := range []string{"", "CreateReplace"} {
		name := policy
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			group := "t" + rand.String(6) + ".crds.helmapp.io"
			crdName := "things." + group
			e := newNamespace(t)
			t.Cleanup(func() {
				_ = e.c.Delete(context.Background(), crdObject(crdName))
			})
			more := ""
			if policy != "" {
				more = "crds: {upgrade: " + policy + "}"
			}
			e.launch(bulkyWatches(t, crdChart(t, group, 1), more), nil)
			cr := e.create(bulkyGVK, "c", map[string]any{})
			e.wait(bulkyGVK, "c", status.TypeReady, metav1.ConditionTrue, status.ReasonInstallSuccessful)
			if ev := e.waitEvent(cr, corev1.EventTypeNormal, reconciler.EventCRDsApplied); !strings.Contains(ev.Message, crdName) {
				t.Errorf("CRDsApplied event %q does not name %s", ev.Message, crdName)
			}
			thing := schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Thing"}
			if a := e.thingSpec(thing)["a"]; a != "x" {
				t.Errorf("the Thing's spec.a = %v", a)
			}

			// The chart's v2.
			e.stopOp()
			e.launch(bulkyWatches(t, crdChart(t, group, 2), more), nil)
			e.poke(bulkyGVK, "c")
			u := e.wait(bulkyGVK, "c", status.TypeReady, metav1.ConditionTrue, status.ReasonUpgradeSuccessful)
			if rev := nested(u, "status", "deployedRelease", "revision"); rev != int64(2) {
				t.Fatalf("deployedRelease.revision = %v, want 2", rev)
			}
			hasB := e.crdHasField(crdName, "b")
			b, kept := e.thingSpec(thing)["b"]
			applied := e.countEvents(cr, reconciler.EventCRDsApplied)
			if policy == "" {
				if hasB || kept || applied != 1 {
					t.Errorf("Skip: the CRD has b: %v, the Thing keeps b: %v, %d CRDsApplied events; want false, false, 1", hasB, kept, applied)
				}
				return
			}
			if !hasB || b != "bee" || applied != 2 {
				t.Errorf("CreateReplace: the CRD has b: %v, the Thing's b: %v, %d CRDsApplied events; want true, bee, 2", hasB, b, applied)
			}

			// v3 drops the CRD's stored version: refused, named, nothing upgraded.
			e.stopOp()
			e.launch(bulkyWatches(t, crdChart(t, group, 3), more), nil)
			e.poke(bulkyGVK, "c")
			u = e.wait(bulkyGVK, "c", status.TypeReleaseFailed, metav1.ConditionTrue, status.ReasonCRDApplyError)
			msg := conditionMessage(u, status.TypeReleaseFailed)
			if !strings.Contains(msg, "Upgrade of release c failed: applying the chart's CRD "+crdName) || !strings.Contains(msg, "storedVersions") {
				t.Errorf("ReleaseFailed message %q does not name the CRD and the refusal", msg)
			}
			if rev := nested(u, "status", "deployedRelease", "revision"); rev != int64(2) {
				t.Errorf("deployedRelease.revision = %v after the refused CRD, want 2", rev)
			}
			if h := history(t, e.ns, "c"); len(h) != 2 {
				t.Errorf("Helm's history has %d revisions, want 2: the upgrade never ran", len(h))
			}

			// Uninstalled, the CRD stays.
			if err := e.c.Delete(context.Background(), cr); err != nil {
				t.Fatal(err)
			}
			e.waitGone(bulkyGVK, "c")
			if err := e.c.Get(context.Background(), client.ObjectKey{Name: crdName}, crdObject(crdName)); err != nil {
				t.Errorf("the CRD is gone after the uninstall: %v", err)
			}
		})
	}
}

func (e *env) thingSpec(gvk schema.GroupVersionKind) map[string]any {
	e.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := e.c.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: "c"}, u); err != nil {
		e.t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	return spec
}

func (e *env) crdHasField(name, field string) bool {
	e.t.Helper()
	crd := crdObject(name)
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
		e.t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) == 0 {
		return false
	}
	_, ok, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", field)
	return ok
}

func crdObject(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apiextensions.k8s.io/v1")
	u.SetKind("CustomResourceDefinition")
	u.SetName(name)
	return u
}
