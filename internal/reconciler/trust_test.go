package reconciler_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/reconciler"
	"github.com/helmapp/helm-app-operator/internal/status"
	"github.com/helmapp/helm-app-operator/internal/testing/controlplane"
	"github.com/helmapp/helm-app-operator/internal/testing/operatortest"
	tu "github.com/helmapp/helm-app-operator/internal/testing/testutil"
)

// trustOperatorUser is the user the operator runs as in the trust test,
// so that the API server's audit log tells its requests from the others.
const trustOperatorUser = "helm-app-operator-under-test"

// Issue 38: a tenant who may only create and read Nginx resources in
// namespace A, with the `edit` role there, rewrites the deployed release
// record in place — same Secret, same revision, labels kept — to list a
// ConfigMap of namespace B that he cannot touch himself. The operator, in
// the default deployment (cluster-wide, as itself), must neither read,
// patch nor delete that ConfigMap on the re-apply, the upgrade or the
// uninstall the tenant then causes: the audit log of the API server shows
// none of it, and the resource says ReleaseRecordInvalid, naming the
// record. Deleting the record lets the operator go on.
//
// It runs its own control plane, with an audit log (the package's runs
// none); its controller manager aggregates the `edit` role's rules.
func TestRewrittenRecordIsNotActedOn(t *testing.T) {
	ctx := context.Background()
	startCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	acp, err := controlplane.Start(startCtx, controlplane.Options{WorkDir: t.TempDir(), AuditLog: true, Full: true,
		CRDDirectoryPaths: []string{filepath.Join(tu.RepoRoot(), "config", "crd", "bases")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = acp.Stop() })
	admin := tu.Client(t, acp.Config)
	nsA := tu.Namespace(t, admin, "tenant-a")
	nsB := tu.Namespace(t, admin, "other-b")

	// The admin's ConfigMap in B.
	precious := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "precious", Namespace: nsB},
		Data: map[string]string{"owner": "the admin of " + nsB}}
	if err := admin.Create(ctx, precious); err != nil {
		t.Fatal(err)
	}

	// The tenant: Nginx resources in A, and the built-in `edit` role there.
	tu.ServiceAccount(t, admin, nsA, "tenant", []rbacv1.PolicyRule{{APIGroups: []string{"web.helmapp.io"},
		Resources: []string{"nginxes"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}}}, nsA)
	if err := admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit", Namespace: nsA},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: nsA, Name: "tenant"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}}); err != nil {
		t.Fatal(err)
	}
	tenantCfg := tu.Impersonating(acp.Config, nsA, "tenant")
	tu.WaitUntilAllowed(t, tenantCfg, "update", "", "secrets", nsA, true)
	tu.WaitUntilAllowed(t, tenantCfg, "create", "web.helmapp.io", "nginxes", nsA, true)
	tu.WaitUntilAllowed(t, tenantCfg, "get", "", "configmaps", nsB, false)
	tenant := tu.Client(t, tenantCfg)

	// The operator, cluster-wide and as itself (no lockdown).
	_, opCfg, err := acp.AddUser(trustOperatorUser, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	// finalizer: always: the deletion below takes the uninstall path, which
	// the nginx chart's releases need no finalizer for (envtest has no
	// garbage collector).
	ws := tu.WatchesFile(t, `
- {group: web.helmapp.io, version: v1alpha1, kind: Nginx, chart: helm-charts/nginx, watchDependentResources: true, reconcilePeriod: 3s, finalizer: always}
`)
	logs := &syncBuffer{}
	logger := zapLogger(logs)
	stop := operatortest.Start(t, opCfg, ws, nil, func(c *operator.Config) {
		c.Logger = &logger
		c.RetryBase, c.RetryMax = 200*time.Millisecond, 2*time.Second
	})
	defer stop()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operator log:\n%s", logs.String())
		}
	})

	if err := tenant.Create(ctx, tu.NewCR(tu.NginxGVK, nsA, "web", map[string]any{"replicaCount": int64(1)})); err != nil {
		t.Fatal(err)
	}
	tu.WaitForCondition(t, admin, tu.NginxGVK, nsA, "web", status.TypeDeployed, metav1.ConditionTrue, "")

	extra := fmt.Sprintf(`
---
# Source: nginx/templates/extra.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: precious
  namespace: %s
data:
  owner: the tenant of %s
`, nsB, nsA)
	record := "sh.helm.release.v1.web.v1"
	named := nsA + "/" + record
	invalid := func(what string) {
		t.Helper()
		u := tu.WaitForCondition(t, admin, tu.NginxGVK, nsA, "web", status.TypeStalled, metav1.ConditionTrue, status.ReasonReleaseRecordInvalid)
		if msg := conditionMessage(u, status.TypeStalled); !strings.Contains(msg, named) || !strings.Contains(msg, "revision 1") {
			t.Errorf("%s: Stalled says %q, want the record %s and its revision named", what, msg, named)
		}
		if d := nested(u, "status", "deployedRelease", "revision"); d != int64(1) {
			t.Errorf("%s: status.deployedRelease.revision is %v, want 1 still", what, d)
		}
	}

	// The re-apply: the rewrite itself reconciles the resource (the watch
	// of Helm's records), and the period repeats it.
	forgeRecord(t, tenant, nsA, record, extra)
	invalid("after the rewrite")
	// The upgrade a new spec asks for (Helm would delete what the record
	// lists that the new revision lacks).
	tu.PatchSpec(t, tenant, tu.NginxGVK, nsA, "web", map[string]any{"replicaCount": int64(2)})
	invalid("after a spec change")
	if h := auditedTouches(t, acp.AuditLogPath, nsB, "precious"); len(h) > 0 {
		t.Errorf("the operator touched ConfigMap %s/precious: %s", nsB, strings.Join(h, "; "))
	}

	// Deleting the record, as the message says, lets the operator deploy
	// the resource's spec again.
	if err := tenant.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: record, Namespace: nsA}}); err != nil {
		t.Fatal(err)
	}
	u := tu.WaitForCondition(t, admin, tu.NginxGVK, nsA, "web", status.TypeStalled, metav1.ConditionFalse, "")
	expect(t, u, "Deployed=True")

	// The uninstall: the record rewritten again, the resource deleted.
	forgeRecord(t, tenant, nsA, record, extra)
	invalid("after the second rewrite")
	u, err = tu.Get(t, admin, tu.NginxGVK, nsA, "web")
	if err != nil {
		t.Fatal(err)
	}
	gen := u.GetGeneration()
	if err := tenant.Delete(ctx, tu.NewCR(tu.NginxGVK, nsA, "web", nil)); err != nil {
		t.Fatal(err)
	}
	// The deletion is a new generation: the condition below is the
	// deletion's verdict.
	u = tu.WaitForCondition(t, admin, tu.NginxGVK, nsA, "web", status.TypeStalled, metav1.ConditionTrue, status.ReasonReleaseRecordInvalid)
	if u.GetDeletionTimestamp() == nil || u.GetGeneration() <= gen {
		t.Fatalf("the resource is not being deleted, or its deletion is not a new generation (was %d): %s", gen, tu.Describe(u))
	}
	if h := auditedTouches(t, acp.AuditLogPath, nsB, "precious"); len(h) > 0 {
		t.Errorf("the operator touched ConfigMap %s/precious: %s", nsB, strings.Join(h, "; "))
	}
	// Deleting the record lets the deletion through: nothing is left to
	// uninstall.
	if err := tenant.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: record, Namespace: nsA}}); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, 2*time.Minute, "the resource to go", func() (bool, string) {
		_, err := tu.Get(t, admin, tu.NginxGVK, nsA, "web")
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})

	got := &corev1.ConfigMap{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(precious), got); err != nil {
		t.Fatalf("ConfigMap %s/precious: %v", nsB, err)
	}
	if got.Data["owner"] != precious.Data["owner"] || got.ResourceVersion != precious.ResourceVersion {
		t.Errorf("ConfigMap %s/precious changed: %v (resourceVersion %s, was %s)", nsB, got.Data, got.ResourceVersion, precious.ResourceVersion)
	}
	if h := auditedTouches(t, acp.AuditLogPath, nsB, "precious"); len(h) > 0 {
		t.Errorf("the operator touched ConfigMap %s/precious: %s", nsB, strings.Join(h, "; "))
	}
}

// forgeRecord rewrites the release record Secret key of ns in place, as a
// tenant with `edit` can: its manifest decoded as Helm encodes it (base64
// of gzipped JSON), extra appended, and encoded again; the Secret's name
// and labels (revision, status, owner) are kept.
func forgeRecord(t *testing.T, c client.Client, ns, key, extra string) {
	t.Helper()
	ctx := context.Background()
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: key}, s); err != nil {
		t.Fatal(err)
	}
	raw, err := base64.StdEncoding.DecodeString(string(s.Data["release"]))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	js, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var rls helmrelease.Release
	if err := json.Unmarshal(js, &rls); err != nil {
		t.Fatal(err)
	}
	rls.Manifest += extra
	if js, err = json.Marshal(&rls); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(js); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	s.Data["release"] = []byte(base64.StdEncoding.EncodeToString(buf.Bytes()))
	if err := c.Update(ctx, s); err != nil {
		t.Fatalf("the tenant rewriting %s/%s: %v", ns, key, err)
	}
}

// auditedTouches lists the requests of the operator's user (or of anyone
// it impersonated) that read, patched, updated or deleted the ConfigMap
// ns/name, from the API server's audit log.
func auditedTouches(t *testing.T, path, ns, name string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Verb string `json:"verb"`
			User struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource  string `json:"resource"`
				Namespace string `json:"namespace"`
				Name      string `json:"name"`
			} `json:"objectRef"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		if ev.User.Username != trustOperatorUser || ev.ObjectRef.Resource != "configmaps" ||
			ev.ObjectRef.Namespace != ns || ev.ObjectRef.Name != name {
			continue
		}
		switch ev.Verb {
		case "get", "patch", "update", "delete":
			found = append(found, ev.Verb)
		}
	}
	return found
}

// A resource that keeps its release on deletion (helmapp.io/uninstall-on-delete:
// "false") reads what its records list to take its owner references off
// them; with the deployed record rewritten in place, the deletion reads
// nothing of what it lists and waits, stalled, until the record is
// restored or deleted. Deleting the record lets the resource go.
func TestKeepWithARewrittenRecordReadsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	nsB := tu.Namespace(t, e.c, "other-b")
	precious := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "precious", Namespace: nsB}, Data: map[string]string{"owner": "admin"}}
	if err := e.c.Create(ctx, precious); err != nil {
		t.Fatal(err)
	}
	var read atomic.Int64
	fault := func(obj client.Object) error {
		if obj.GetNamespace() == nsB {
			read.Add(1)
		}
		return nil
	}
	e.readFault.Store(&fault)
	cr := tu.NewCR(tu.NginxGVK, e.ns, "web", map[string]any{})
	cr.SetAnnotations(map[string]string{reconciler.AnnotationUninstallOnDelete: "false"})
	if err := e.c.Create(ctx, cr); err != nil {
		t.Fatal(err)
	}
	e.wait(tu.NginxGVK, "web", status.TypeDeployed, metav1.ConditionTrue, status.ReasonInstallSuccessful)
	forgeRecord(t, e.c, e.ns, "sh.helm.release.v1.web.v1", fmt.Sprintf("\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: precious\n  namespace: %s\n", nsB))
	u := e.wait(tu.NginxGVK, "web", status.TypeStalled, metav1.ConditionTrue, status.ReasonReleaseRecordInvalid)
	gen := u.GetGeneration()
	if err := e.c.Delete(ctx, cr); err != nil {
		t.Fatal(err)
	}
	u = e.wait(tu.NginxGVK, "web", status.TypeStalled, metav1.ConditionTrue, status.ReasonReleaseRecordInvalid)
	if u.GetDeletionTimestamp() == nil || u.GetGeneration() <= gen {
		t.Fatalf("not the deletion's verdict: %s", tu.Describe(u))
	}
	if n := read.Load(); n != 0 {
		t.Errorf("the operator read %d objects of namespace %s listed by the rewritten record", n, nsB)
	}
	if err := e.c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v1", Namespace: e.ns}}); err != nil {
		t.Fatal(err)
	}
	e.waitGone(tu.NginxGVK, "web")
	if n := read.Load(); n != 0 {
		t.Errorf("the operator read %d objects of namespace %s listed by the rewritten record", n, nsB)
	}
}
