package release

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func decode(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(s), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

const wantDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns, labels: {app: web}}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        ports: [{name: http, containerPort: 80}]
`

// What the API server stores for wantDeployment: defaults, status and
// metadata added, nothing the manifest sets changed.
const liveDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns, labels: {app: web, extra: added-by-someone}, resourceVersion: "7", uid: u1, generation: 1}
spec:
  replicas: 2
  revisionHistoryLimit: 10
  progressDeadlineSeconds: 600
  selector: {matchLabels: {app: web}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 25%, maxUnavailable: 25%}}
  template:
    metadata: {labels: {app: web}}
    spec:
      restartPolicy: Always
      dnsPolicy: ClusterFirst
      containers:
      - name: nginx
        image: nginx:1.27
        imagePullPolicy: IfNotPresent
        terminationMessagePath: /dev/termination-log
        ports: [{name: http, containerPort: 80, protocol: TCP}]
      - name: sidecar
        image: injected
status: {replicas: 2, availableReplicas: 2}
`

func TestDriftPatch(t *testing.T) {
	want := decode(t, wantDeployment)
	tests := []struct {
		name  string
		live  func(*unstructured.Unstructured)
		drift string // a part of the patch; empty: no drift
	}{
		{"defaults, status and additions are no drift", func(*unstructured.Unstructured) {}, ""},
		{"replicas changed", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(5), "spec", "replicas")
		}, `"replicas":2`},
		{"label removed", func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{"extra": "x"})
		}, `"app":"web"`},
		{"container image changed", func(u *unstructured.Unstructured) {
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			cs[0].(map[string]any)["image"] = "evil"
			_ = unstructured.SetNestedSlice(u.Object, cs, "spec", "template", "spec", "containers")
		}, `"image":"nginx:1.27"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := decode(t, liveDeployment)
			tt.live(live)
			p, err := driftPatch(want, live)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.drift == "" && p != nil:
				data, _ := p.Data(nil)
				t.Errorf("found drift where there is none: %s", data)
			case tt.drift != "" && p == nil:
				t.Errorf("found no drift")
			case tt.drift != "":
				if data, _ := p.Data(nil); !strings.Contains(string(data), tt.drift) {
					t.Errorf("patch %s does not restore %s", data, tt.drift)
				}
			}
		})
	}
}

// TestDriftPatchNullFieldsAreNotSet (issue 39): sealed-secrets writes
// `annotations:` and a container's `env:` with nothing under them (null).
// The API server stores neither; what others put there (Helm's ownership
// annotations, the Deployment controller's revision) is no drift, and no
// patch deletes it. A field the manifest does set is still restored.
func TestDriftPatchNullFieldsAreNotSet(t *testing.T) {
	want := decode(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ns, labels: {app: web}, annotations: null}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}, annotations: null}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
        env: null
        ports: [{name: http, containerPort: 80}]
`)
	live := decode(t, liveDeployment)
	live.SetAnnotations(map[string]string{"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": "ns",
		"deployment.kubernetes.io/revision": "1"})
	if p, err := driftPatch(want, live); err != nil || p != nil {
		var data []byte
		if p != nil {
			data, _ = p.Data(nil)
		}
		t.Errorf("null fields of the manifest found as drift: %s %v", data, err)
	}
	_ = unstructured.SetNestedField(live.Object, int64(5), "spec", "replicas")
	p, err := driftPatch(want, live)
	if err != nil || p == nil {
		t.Fatalf("replicas changed: no patch (%v)", err)
	}
	if data, _ := p.Data(nil); strings.Contains(string(data), "annotations") || !strings.Contains(string(data), `"replicas":2`) {
		t.Errorf("patch %s: want replicas restored and the annotations left alone", data)
	}
	role := decode(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r, namespace: ns, annotations: null}\nrules: [{apiGroups: [''], resources: [secrets], verbs: [get]}]\n")
	liveRole := decode(t, "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: r, namespace: ns, annotations: {meta.helm.sh/release-name: r}}\nrules: [{apiGroups: [''], resources: [secrets], verbs: [get]}]\n")
	if p, err := driftPatch(role, liveRole); err != nil || p != nil {
		t.Errorf("a Role with null annotations found drifted: %v %v", p, err)
	}
}

func TestDriftPatchSecretStringData(t *testing.T) {
	want := decode(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: ns}\nstringData: {token: abc}\n")
	normalizeSecret(want)
	live := decode(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: ns, resourceVersion: '3'}\ntype: Opaque\ndata: {token: YWJj}\n")
	if p, err := driftPatch(want, live); err != nil || p != nil {
		t.Errorf("a Secret written with stringData drifts from itself: %v %v", p, err)
	}
	live = decode(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: ns}\ntype: Opaque\ndata: {token: eHl6}\n")
	if p, _ := driftPatch(want, live); p == nil {
		t.Errorf("a changed Secret value is not drift")
	}
}

func TestDriftPatchCustomResource(t *testing.T) {
	want := decode(t, "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: a, namespace: ns}\nspec: {size: 3}\n")
	live := decode(t, "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: a, namespace: ns, resourceVersion: '1'}\nspec: {size: 3, defaulted: true}\nstatus: {ok: true}\n")
	if p, err := driftPatch(want, live); err != nil || p != nil {
		t.Errorf("an unchanged custom resource drifts: %v %v", p, err)
	}
	_ = unstructured.SetNestedField(live.Object, int64(4), "spec", "size")
	if p, _ := driftPatch(want, live); p == nil {
		t.Errorf("a changed custom resource is not drift")
	}
}
