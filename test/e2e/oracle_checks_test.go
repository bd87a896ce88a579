//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/restmapper"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"

	"github.com/helmapp/helm-app-operator/internal/dependents"
	helmoperator "github.com/helmapp/helm-app-operator/internal/operator"
	"github.com/helmapp/helm-app-operator/internal/release"
)

// oracleViolations checks the safety and truth of a settled snapshot
// (checkOracle, oracle_test.go).
func (e *env) oracleViolations(snap []*oracleResource, o oracleOptions) []string {
	var bad []string
	mapper, err := e.restMapper()
	if err != nil {
		return []string{err.Error()}
	}
	for _, r := range snap {
		for _, v := range e.resourceViolations(r, mapper) {
			bad = append(bad, r.key+": "+v)
		}
		status, _ := json.Marshal(r.u.Object["status"])
		for _, s := range o.secrets {
			if strings.Contains(string(status), s) {
				bad = append(bad, fmt.Sprintf("%s: safety: the status shows a value of the spec (%q)", r.key, s))
			}
		}
	}
	bad = append(bad, e.secretsLeaked(o.secrets)...)
	return bad
}

// resourceViolations checks one resource and its release.
func (e *env) resourceViolations(r *oracleResource, mapper meta.RESTMapper) []string {
	var bad []string
	n, name := r.n, r.u.GetName()
	uid := string(r.u.GetUID())
	if n.Status.ObservedGeneration != n.Metadata.Generation {
		bad = append(bad, fmt.Sprintf("truth: observedGeneration %d, generation %d", n.Status.ObservedGeneration, n.Metadata.Generation))
	}
	ready := n.cond(typeReady) != nil && n.cond(typeReady).Status == metav1.ConditionTrue
	if ready && n.cond(typeStalled) != nil && n.cond(typeStalled).Status == metav1.ConditionTrue {
		bad = append(bad, "truth: Ready=True and Stalled=True")
	}

	// Whose release: the owner the latest record names.
	owner := ""
	for _, rec := range r.records {
		if u := rec.Labels[release.LabelOwnerUID]; u != "" {
			owner = u
		}
	}
	if owner != "" && owner != uid {
		if r.deployed != nil {
			bad = append(bad, fmt.Sprintf("safety: deployedRelease names revision %d of release %s, which belongs to %s", r.deployed.Revision, name, owner))
		}
		if ready {
			bad = append(bad, fmt.Sprintf("truth: Ready=True with release %s belonging to %s", name, owner))
		}
		return bad
	}

	var deployed *helmrelease.Release
	var history []string
	revisions := map[int]bool{}
	for _, rec := range r.records {
		revisions[rec.Version] = true
		history = append(history, fmt.Sprintf("%d=%s", rec.Version, rec.Info.Status))
		if rec.Info.Status == helmrelease.StatusDeployed {
			if deployed != nil {
				bad = append(bad, fmt.Sprintf("safety: revisions %d and %d both deployed", deployed.Version, rec.Version))
			}
			deployed = rec
		}
		if u := rec.Labels[release.LabelOwnerUID]; u != "" && (rec.Labels[release.LabelOwnerKind] != r.u.GetKind() ||
			rec.Labels[release.LabelOwnerGroup] != r.u.GroupVersionKind().Group) {
			bad = append(bad, fmt.Sprintf("safety: revision %d names its owner %s %s/%s, not %s", rec.Version,
				rec.Labels[release.LabelOwnerKind], rec.Labels[release.LabelOwnerGroup], u, r.u.GroupVersionKind().GroupKind()))
		}
	}
	bad = append(bad, e.cliHistoryViolations(name, r.plain)...)
	bad = append(bad, causeViolations(r.u, r.records)...)

	// deployedRelease is Helm's deployed revision, digests computed here.
	switch d := r.deployed; {
	case deployed == nil && d != nil:
		bad = append(bad, fmt.Sprintf("truth: deployedRelease names revision %d, Helm has none deployed (history %v)", d.Revision, history))
	case deployed != nil && d == nil:
		bad = append(bad, fmt.Sprintf("truth: no deployedRelease, Helm has revision %d deployed", deployed.Version))
	case deployed != nil:
		want := fmt.Sprintf("revision %d, chart %s %s, status deployed, values %s, manifest %s", deployed.Version,
			deployed.Chart.Metadata.Name, deployed.Chart.Metadata.Version, valuesDigestOf(deployed.Config, d.ValuesDigest), digestOf(deployed.Manifest))
		got := fmt.Sprintf("revision %d, chart %s %s, status %s, values %s, manifest %s", d.Revision, d.Chart, d.ChartVersion, d.Status, d.ValuesDigest, d.ManifestDigest)
		if got != want {
			bad = append(bad, fmt.Sprintf("truth: deployedRelease says %s; Helm's record: %s", got, want))
		}
	}
	if c := n.cond("ReleaseFailed"); c != nil && c.Status == metav1.ConditionTrue && r.failedRevision > 0 && len(r.records) > 0 && !revisions[r.failedRevision] {
		bad = append(bad, fmt.Sprintf("truth: failedRelease names revision %d, which Helm does not have (history %v)", r.failedRevision, history))
	}

	if deployed == nil {
		if ready {
			bad = append(bad, fmt.Sprintf("truth: Ready=True with no deployed revision (history %v)", history))
		}
		return bad
	}
	if ready {
		var spec any
		if err := roundTrip(r.u.Object["spec"], &spec); err != nil {
			bad = append(bad, err.Error())
		}
		var config any = map[string]any{}
		if deployed.Config != nil {
			if err := roundTrip(deployed.Config, &config); err != nil {
				bad = append(bad, err.Error())
			}
		}
		// With valuesFrom, what the spec's references read is merged over it.
		spec, known := expectedValues(context.Background(), r.u, spec)
		if known && spec != nil && !carries(config, spec) {
			bad = append(bad, fmt.Sprintf("truth: Ready=True, but the deployed revision %d does not carry the spec", deployed.Version))
		}
	}
	objs, err := manifestObjects(deployed.Manifest)
	if err != nil {
		return append(bad, fmt.Sprintf("reading the manifest of revision %d: %v", deployed.Version, err))
	}
	for _, obj := range objs {
		bad = append(bad, e.objectViolations(obj, deployed, uid, ready, mapper)...)
	}
	return bad
}

// objectViolations checks an object of the deployed revision: that it
// carries its owner's marks, and that it is Current when the resource is
// Ready.
func (e *env) objectViolations(obj *unstructured.Unstructured, rel *helmrelease.Release, uid string, ready bool, mapper meta.RESTMapper) []string {
	gvk := obj.GroupVersionKind()
	what := gvk.Kind + " " + obj.GetName()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return []string{fmt.Sprintf("mapping %s: %v", what, err)}
	}
	res := suite.dyn.Resource(m.Resource)
	var live *unstructured.Unstructured
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = rel.Namespace
		}
		live, err = res.Namespace(ns).Get(context.Background(), obj.GetName(), metav1.GetOptions{})
	} else {
		live, err = res.Get(context.Background(), obj.GetName(), metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		if ready {
			return []string{fmt.Sprintf("truth: Ready=True, but %s of revision %d does not exist", what, rel.Version)}
		}
		return nil
	}
	if err != nil {
		return []string{fmt.Sprintf("reading %s: %v", what, err)}
	}
	var bad []string
	if live.GetLabels()[dependents.ManagedLabel] != dependents.ManagedLabelValue {
		bad = append(bad, fmt.Sprintf("safety: %s lacks the label %s=%s", what, dependents.ManagedLabel, dependents.ManagedLabelValue))
	}
	if got := live.GetAnnotations()["meta.helm.sh/release-name"]; got != rel.Name {
		bad = append(bad, fmt.Sprintf("safety: %s belongs to release %q, not %s", what, got, rel.Name))
	}
	owned := false
	for _, ref := range live.GetOwnerReferences() {
		owned = owned || string(ref.UID) == uid
	}
	if !owned {
		bad = append(bad, fmt.Sprintf("safety: %s has no owner reference to its resource (%v)", what, live.GetOwnerReferences()))
	}
	if ready {
		res, err := kstatus.Compute(live)
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("judging %s: %v", what, err))
		case res.Status != kstatus.CurrentStatus:
			bad = append(bad, fmt.Sprintf("truth: Ready=True, but %s is %s: %s", what, res.Status, res.Message))
		}
	}
	return bad
}

// cliHistoryViolations compares `helm history` with plain, the records of
// Helm's own driver, which is what the CLI reads.
func (e *env) cliHistoryViolations(name string, plain []*helmrelease.Release) []string {
	want := map[int]string{}
	for _, rec := range plain {
		want[rec.Version] = rec.Info.Status.String()
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	out, err := suite.cp.Helm(ctx, "history", name, "-n", e.ns, "-o", "json", "--max", "1000")
	if err != nil {
		if len(want) == 0 && strings.Contains(err.Error(), "not found") {
			return nil
		}
		return []string{fmt.Sprintf("helm history %s: %v", name, err)}
	}
	var h []helmRevision
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		return []string{fmt.Sprintf("helm history %s: %v", name, err)}
	}
	got := map[int]string{}
	deployed := 0
	for _, row := range h {
		got[row.Revision] = row.Status
		if row.Status == "deployed" {
			deployed++
		}
	}
	var bad []string
	if deployed > 1 {
		bad = append(bad, fmt.Sprintf("safety: helm history lists %d deployed revisions: %+v", deployed, h))
	}
	if !reflect.DeepEqual(got, want) {
		bad = append(bad, fmt.Sprintf("helm history %v differs from the records %v", got, want))
	}
	return bad
}

// secretsLeaked finds the secrets in the namespace's events and the
// operators' logs.
func (e *env) secretsLeaked(secrets []string) []string {
	if len(secrets) == 0 {
		return nil
	}
	var bad []string
	events, err := suite.kube.CoreV1().Events(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return []string{fmt.Sprintf("listing events: %v", err)}
	}
	for _, ev := range events.Items {
		for _, s := range secrets {
			if strings.Contains(ev.Message, s) {
				bad = append(bad, fmt.Sprintf("safety: event %s %s about %s shows a value of a spec (%q)", ev.Type, ev.Reason, ev.InvolvedObject.Name, s))
			}
		}
	}
	if flags := os.Getenv("E2E_OPERATOR_FLAGS"); strings.Contains(flags, "zap-log-level") && !strings.Contains(flags, "zap-log-level=info") {
		e.t.Logf("oracle: E2E_OPERATOR_FLAGS=%q: the operator logs beyond info, its logs are not searched for values", flags)
		return bad
	}
	logs, _ := filepath.Glob(filepath.Join(e.dir, "operator*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			bad = append(bad, err.Error())
			continue
		}
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				bad = append(bad, fmt.Sprintf("safety: the operator's log %s shows a value of a spec (%q)", l, s))
			}
		}
	}
	return bad
}

// restMapper maps the kinds of the releases' objects to their resources.
func (e *env) restMapper() (meta.RESTMapper, error) {
	groups, err := restmapper.GetAPIGroupResources(suite.kube.Discovery())
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	return restmapper.NewDiscoveryRESTMapper(groups), nil
}

// manifestObjects are the objects of a release's manifest (hooks are not in
// it).
func manifestObjects(manifest string) ([]*unstructured.Unstructured, error) {
	docs := releaseutil.SplitManifests(manifest)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []*unstructured.Unstructured
	for _, k := range keys {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(docs[k]), &m); err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}

// digestOf is sha256 of v's JSON, as docs/status.md describes the manifest
// digest of deployedRelease.
func digestOf(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "unencodable: " + err.Error()
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// valuesDigestOf is the values digest of deployedRelease for a revision's
// values (no values counting as empty ones): their HMAC-SHA256 under the key
// of an operator of the cluster, the Secret helmoperator.DigestKeySecret of its
// namespace (docs/status.md). The operators of the suite's tests keep theirs
// in different namespaces: got, the digest the status shows, picks the key
// it was made with, and a digest made with none of them is shown as such.
func valuesDigestOf(vals map[string]any, got string) string {
	if vals == nil {
		vals = map[string]any{}
	}
	keys, err := suite.kube.CoreV1().Secrets("").List(context.Background(),
		metav1.ListOptions{FieldSelector: "metadata.name=" + helmoperator.DigestKeySecret})
	if err != nil {
		return "unknown (listing the digest keys: " + err.Error() + ")"
	}
	var first string
	for _, k := range keys.Items {
		d := release.DigestKey(k.Data[helmoperator.DigestKeyField]).Values(vals)
		if d == got {
			return d
		}
		if first == "" {
			first = d
		}
	}
	if first == "" {
		return "unknown (no digest key Secret in the cluster)"
	}
	return first + " (or that of another of the cluster's " + fmt.Sprint(len(keys.Items)) + " keys)"
}

// roundTrip decodes v's JSON into out, so that values decoded in different
// ways (int64 from the API server, float64 from Helm's record) compare.
func roundTrip(v any, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// carries reports whether values holds every value of spec: the values a
// revision was made with are the spec and the watch's overrideValues on
// top.
func carries(values, spec any) bool {
	sm, ok := spec.(map[string]any)
	if !ok {
		return reflect.DeepEqual(values, spec)
	}
	vm, ok := values.(map[string]any)
	if !ok {
		return false
	}
	for k, sv := range sm {
		if !carries(vm[k], sv) {
			return false
		}
	}
	return true
}
