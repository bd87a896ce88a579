package chartkit

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/helmapp/helm-app-operator/internal/watches"
)

// TestWriteWatchKeepsWhatItDoesNotOwn: updating an entry sets the fields the
// command owns (chart, its RELATED_IMAGE overrides, scope) and keeps every
// other field, override and comment; an empty scope takes scope away.
func TestWriteWatchKeepsWhatItDoesNotOwn(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, watchesFile)
	const before = `# header
- group: app.helmapp.io
  version: v1alpha1
  kind: App
  chart: helm-charts/app
  # the author's note
  overrideValues:
    replicaCount: "2"
    old.image: $RELATED_IMAGE_APP
  reconcilePeriod: 5m
- group: other.helmapp.io
  version: v1
  kind: Other
  chart: helm-charts/other
`
	if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	scope := watches.Scope{ClusterScoped: []watches.ScopeRule{{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Names: []string{"{{release}}-*"}}}}
	e := watchEntry{Group: "app.helmapp.io", Version: "v1alpha1", Kind: "App", Chart: "helm-charts/app"}
	if _, err := writeWatch(root, e, []override{{"image.reference", "$RELATED_IMAGE_APP"}}, scope, nil); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	const want = `# header
- group: app.helmapp.io
  version: v1alpha1
  kind: App
  chart: helm-charts/app
  # the author's note
  overrideValues:
    replicaCount: "2"
    image.reference: $RELATED_IMAGE_APP
  reconcilePeriod: 5m
  scope:
    clusterScoped:
    - group: rbac.authorization.k8s.io
      kind: ClusterRole
      names:
      - '{{release}}-*'
- group: other.helmapp.io
  version: v1
  kind: Other
  chart: helm-charts/other
`
	if string(got) != want {
		t.Errorf("watches.yaml:\n%s\nwant:\n%s", got, want)
	}
	if changed, err := writeWatch(root, e, []override{{"image.reference", "$RELATED_IMAGE_APP"}}, scope, nil); err != nil || changed {
		t.Errorf("the same update again: changed %v, err %v", changed, err)
	}
	if _, err := writeWatch(root, e, nil, watches.Scope{}, nil); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(path)
	const noScope = `# header
- group: app.helmapp.io
  version: v1alpha1
  kind: App
  chart: helm-charts/app
  # the author's note
  overrideValues:
    replicaCount: "2"
  reconcilePeriod: 5m
- group: other.helmapp.io
  version: v1
  kind: Other
  chart: helm-charts/other
`
	if string(got) != noScope {
		t.Errorf("watches.yaml without images and scope:\n%s\nwant:\n%s", got, noScope)
	}
}

// TestWriteManagerEnv: the kind's RELATED_IMAGE variables get their values,
// new ones follow the last RELATED_IMAGE variable, stale ones of the kind go,
// and other kinds' stay.
func TestWriteManagerEnv(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, managerFile)
	const before = `      containers:
      - name: manager
        env:
        - name: WATCH_NAMESPACE
          value: ""
        # The operands' images.
        - name: RELATED_IMAGE_APP
          value: example.com/app:1
        - name: RELATED_IMAGE_APPLE
          value: example.com/apple:1
        - name: RELATED_IMAGE_APP_3
          value: example.com/stale:1
        ports:
        - containerPort: 8081
`
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := writeManagerEnv(root, "App", []relatedImage{{"RELATED_IMAGE_APP", "example.com/app:2"}, {"RELATED_IMAGE_APP_2", "example.com/side:2"}}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	const want = `      containers:
      - name: manager
        env:
        - name: WATCH_NAMESPACE
          value: ""
        # The operands' images.
        - name: RELATED_IMAGE_APP
          value: example.com/app:2
        - name: RELATED_IMAGE_APPLE
          value: example.com/apple:1
        - name: RELATED_IMAGE_APP_2
          value: example.com/side:2
        ports:
        - containerPort: 8081
`
	if string(got) != want {
		t.Errorf("manager.yaml:\n%s\nwant:\n%s", got, want)
	}
	if _, err := writeManagerEnv(root, "App", nil); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(path)
	const removed = `      containers:
      - name: manager
        env:
        - name: WATCH_NAMESPACE
          value: ""
        # The operands' images.
        - name: RELATED_IMAGE_APPLE
          value: example.com/apple:1
        ports:
        - containerPort: 8081
`
	if string(got) != removed {
		t.Errorf("manager.yaml without App's images:\n%s\nwant:\n%s", got, removed)
	}
}
