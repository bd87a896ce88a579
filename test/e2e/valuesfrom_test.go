//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The password of the valuesFrom scenario: the marker the oracle looks for
// in statuses, events and the operator's log.
const (
	valuesFromSecret1 = "vf-secret-one-8c2e1a"
	valuesFromSecret2 = "vf-secret-two-5b7d3f"
	valuesFromSecret3 = "vf-secret-three-9e4a6c"
)

// valuesFromManifest is the Secret db holding page.title, and an Nginx web
// reading it with valuesFrom.
func valuesFromSecret(title string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  values.yaml: |\n    page:\n      title: %s\n", title)
}

const valuesFromNginx = `apiVersion: web.helmapp.io/v1alpha1
kind: Nginx
metadata:
  name: web
valuesFrom:
- kind: Secret
  name: db
spec:
  replicaCount: 1
`

// Scenario: a password from a Secret installs; editing the Secret upgrades
// the release within 10 s, once; status.valuesSources names the Secret's
// new resourceVersion; `helm history` shows revision 2; the password is in
// no status, event or log line (the oracle).
func TestValuesFromSecretEditUpgradesOnce(t *testing.T) {
	e := newEnv(t, "e2e-valuesfrom", watchOptions{})
	e.apply("secret-db", valuesFromSecret(valuesFromSecret1))
	e.apply("nginx-web", valuesFromNginx)
	e.waitCondition("web", typeReady)
	if rev := e.kubectl("get", "nginx", "web", "-o", "jsonpath={.status.deployedRelease.revision}"); rev != "1" {
		e.fatalf("deployedRelease.revision %q, want 1", rev)
	}

	start := time.Now()
	e.apply("secret-db", valuesFromSecret(valuesFromSecret2))
	rv := e.kubectl("get", "secret", "db", "-o", "jsonpath={.metadata.resourceVersion}")
	n := e.waitNginx("web", "revision 2 from the Secret's edit", func(*nginx) bool {
		got := e.kubectl("get", "nginx", "web", "-o", "jsonpath={.status.deployedRelease.revision} {.status.valuesSources[0].resourceVersion}")
		return got == "2 "+rv
	})
	took := time.Since(start)
	t.Logf("the Secret's edit was deployed as revision 2 in %s", took.Round(time.Millisecond))
	if took > 10*time.Second {
		e.fatalf("the Secret's edit took %s to be deployed, want under 10 s\n%s", took, n)
	}
	e.waitCondition("web", typeReady)
	cause := "ValuesSourceChanged: Secret/db key values.yaml: resourceVersion "
	if h := e.helmHistory("web"); len(h) != 2 || h[1].Status != "deployed" || !strings.Contains(h[1].Description, cause) || !strings.Contains(h[1].Description, "→"+rv) {
		e.fatalf("helm history %+v, want exactly 2 revisions, the second deployed and described %q…→%s", h, cause, rv)
	}
	causes := func() string {
		return e.kubectl("get", "nginx", "web", "-o", `jsonpath={.status.history[0].revision}{range .status.history[0].causes[*]}; {.type}: {.detail}{end}`)
	}
	if got := causes(); !strings.HasPrefix(got, "2; ") || !strings.Contains(got, cause) || !strings.Contains(got, "→"+rv) || strings.Count(got, ";") != 1 {
		e.fatalf("status.history[0] %q, want revision 2 caused by %q…→%s alone", got, cause, rv)
	}

	// One `kubectl apply` of the resource (a new spec) and the Secret (a new
	// password), in that order: one revision, with both.
	e.apply("both", strings.Replace(valuesFromNginx, "replicaCount: 1", "replicaCount: 2", 1)+"---\n"+valuesFromSecret(valuesFromSecret3))
	e.waitNginx("web", "revision 3 with the spec and the Secret", func(n *nginx) bool {
		return n.Metadata.Generation == 2 && n.Status.ObservedGeneration == 2 &&
			e.kubectl("get", "nginx", "web", "-o", "jsonpath={.status.deployedRelease.revision}") == "3"
	})
	e.waitCondition("web", typeReady)
	rv3 := e.kubectl("get", "secret", "db", "-o", "jsonpath={.metadata.resourceVersion}")
	if got := causes(); !strings.HasPrefix(got, "3; ") ||
		!strings.Contains(got, "SpecChanged: generation 1→2") || !strings.Contains(got, cause+rv+"→"+rv3) {
		e.fatalf("status.history[0] %q, want revision 3 caused by both the spec (generation 1→2) and the Secret (%s→%s)", got, rv, rv3)
	}

	e.checkOracle(oracleOptions{secrets: []string{valuesFromSecret1, valuesFromSecret2, valuesFromSecret3}})
	h := e.helmHistory("web")
	if len(h) != 3 || h[2].Status != "deployed" {
		e.fatalf("helm history %+v, want exactly 3 revisions: one for the Secret's edit, one for the spec and the Secret applied together", h)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	out, err := suite.cp.Helm(ctx, "get", "values", "web", "-n", e.ns, "--revision", "3", "-o", "json")
	if err != nil {
		e.fatalf("helm get values: %v", err)
	}
	var vals struct {
		ReplicaCount int `json:"replicaCount"`
		Page         struct {
			Title string `json:"title"`
		} `json:"page"`
	}
	if err := json.Unmarshal([]byte(out), &vals); err != nil || vals.ReplicaCount != 2 || vals.Page.Title != valuesFromSecret3 {
		e.fatalf("revision 3 holds replicaCount %d and another page.title (%v), want the applied spec's 2 and the applied Secret's", vals.ReplicaCount, err)
	}
	if out := e.kubectl("get", "nginx", "web", "-o", "yaml"); containsAny(out, valuesFromSecret1, valuesFromSecret2, valuesFromSecret3) {
		e.fatalf("the resource's YAML holds the password:\n%s", out)
	}
}

// expectedValues is what the deployed revision of u must carry: spec, with
// the YAML of each key its valuesFrom reads merged over it in order (the
// operator's precedence, docs/status.md). ok is false when that cannot be
// said here (a reference with a targetPath, one that cannot be read).
func expectedValues(ctx context.Context, u *unstructured.Unstructured, spec any) (any, bool) {
	refs, _, _ := unstructured.NestedSlice(u.Object, "valuesFrom")
	if len(refs) == 0 {
		return spec, true
	}
	want, _ := spec.(map[string]any)
	if want == nil {
		want = map[string]any{}
	}
	for _, item := range refs {
		ref, _ := item.(map[string]any)
		kind, _ := ref["kind"].(string)
		name, _ := ref["name"].(string)
		key, _ := ref["valuesKey"].(string)
		if key == "" {
			key = "values.yaml"
		}
		if tp, _ := ref["targetPath"].(string); tp != "" {
			return nil, false
		}
		var content string
		switch kind {
		case "Secret":
			s, err := suite.kube.CoreV1().Secrets(u.GetNamespace()).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, false
			}
			content = string(s.Data[key])
		case "ConfigMap":
			c, err := suite.kube.CoreV1().ConfigMaps(u.GetNamespace()).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, false
			}
			content = c.Data[key]
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(content), &m); err != nil {
			return nil, false
		}
		want = mergeOver(want, m)
	}
	return want, true
}

// mergeOver merges src over dst, maps key by key.
func mergeOver(dst, src map[string]any) map[string]any {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				dst[k] = mergeOver(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}
