package crdgen

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/operator-framework/helm-operator-plugins/pkg/watches"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

func loadWatch(t *testing.T, kind, chartDir string) watches.Watch {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return watches.Watch{
		GroupVersionKind: schema.GroupVersionKind{Group: "web.helmapp.io", Version: "v1alpha1", Kind: kind},
		ChartPath:        chartDir,
		Chart:            ch,
	}
}

// toInternal defaults and converts a CRD the way the apiserver does on create.
func toInternal(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) *apiextensions.CustomResourceDefinition {
	t.Helper()
	in := crd.DeepCopy()
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(in)
	var out apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(in, &out, nil); err != nil {
		t.Fatal(err)
	}
	return &out
}

// validateCRD runs the apiserver's validation of a new CRD, which includes
// the structural-schema rules and the checks that defaults are valid and pruned.
func validateCRD(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	t.Helper()
	return validation.ValidateCustomResourceDefinition(context.Background(), toInternal(t, crd))
}

// admit does to a custom resource what the apiserver does on create: prune
// unknown fields (returning their paths, which a strict client rejects),
// apply defaults, validate.
func admit(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, obj map[string]any) ([]string, field.ErrorList) {
	t.Helper()
	internal := toInternal(t, crd)
	// The internal type hoists a schema shared by every version to spec.validation.
	sch := internal.Spec.Validation.OpenAPIV3Schema
	s, err := structuralschema.NewStructural(sch)
	if err != nil {
		t.Fatal(err)
	}
	unknown := pruning.PruneWithOptions(obj, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	defaulting.Default(obj, s)
	v, _, err := apiservervalidation.NewSchemaValidator(sch)
	if err != nil {
		t.Fatal(err)
	}
	return unknown, apiservervalidation.ValidateCustomResource(nil, obj, v)
}

func TestCRDOfProductChartsIsValid(t *testing.T) {
	tests := []struct {
		kind, dir, plural string
		short             []string
	}{
		{"Nginx", "../../../helm-charts/nginx", "nginxes", []string{"ngx"}},
		{"Echo", "../../../helm-charts/echo", "echoes", nil},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			w := loadWatch(t, tt.kind, tt.dir)
			crd, err := CRD(w)
			if err != nil {
				t.Fatal(err)
			}
			if errs := validateCRD(t, crd); len(errs) > 0 {
				t.Fatalf("the apiserver would reject the CRD:\n%v", errs.ToAggregate())
			}
			if crd.Name != tt.plural+".web.helmapp.io" || crd.Spec.Names.Plural != tt.plural ||
				!reflect.DeepEqual(crd.Spec.Names.ShortNames, tt.short) || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
				t.Errorf("names = %s %+v", crd.Name, crd.Spec.Names)
			}
			v := crd.Spec.Versions[0]
			if len(crd.Spec.Versions) != 1 || !v.Served || !v.Storage || v.Name != "v1alpha1" ||
				v.Subresources == nil || v.Subresources.Status == nil {
				t.Errorf("version = %+v", v)
			}
			spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
			wantDesc := "Values for the Helm chart " + w.Chart.Metadata.Name + " 0.1.0"
			if !strings.HasPrefix(spec.Description, wantDesc) {
				t.Errorf("spec description = %q, want prefix %q", spec.Description, wantDesc)
			}
			requireDescriptions(t, "spec", spec)
			requireDescriptions(t, "status", v.Schema.OpenAPIV3Schema.Properties["status"])
		})
	}
}

// requireDescriptions fails for every property without a description.
func requireDescriptions(t *testing.T, path string, s apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	if s.Description == "" {
		t.Errorf("%s has no description", path)
	}
	for name, p := range s.Properties {
		requireDescriptions(t, path+"."+name, p)
	}
	if s.Items != nil && s.Items.Schema != nil && len(s.Items.Schema.Properties) > 0 {
		for name, p := range s.Items.Schema.Properties {
			requireDescriptions(t, path+"[]."+name, p)
		}
	}
}

func TestNginxCRDAdmission(t *testing.T) {
	crd, err := CRD(loadWatch(t, "Nginx", "../../../helm-charts/nginx"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		spec        string // YAML
		status      string // YAML
		wantErr     string
		wantUnknown []string
		check       func(t *testing.T, obj map[string]any)
	}{
		{
			name: "empty spec takes the defaults of values.yaml",
			spec: "{}",
			check: func(t *testing.T, obj map[string]any) {
				var values map[string]any
				if err := yaml.Unmarshal(mustRead(t, "../../../helm-charts/nginx/values.yaml"), &values); err != nil {
					t.Fatal(err)
				}
				if !jsonEqual(obj["spec"], values) {
					got, _ := yaml.Marshal(obj["spec"])
					t.Errorf("defaulted spec differs from values.yaml:\n%s", got)
				}
			},
		},
		{
			name: "partial object is completed",
			spec: "image: {tag: '1.28.0'}",
			check: func(t *testing.T, obj map[string]any) {
				img := obj["spec"].(map[string]any)["image"]
				if !jsonEqual(img, map[string]any{"repository": "docker.io/nginxinc/nginx-unprivileged", "tag": "1.28.0", "pullPolicy": "IfNotPresent", "reference": ""}) {
					t.Errorf("image = %v", img)
				}
			},
		},
		{name: "wrong type", spec: "replicaCount: three", wantErr: "spec.replicaCount"},
		{name: "negative", spec: "replicaCount: -1", wantErr: "spec.replicaCount"},
		{name: "enum", spec: "service: {type: External}", wantErr: "spec.service.type"},
		{name: "int-or-string accepts a percentage", spec: "podDisruptionBudget: {minAvailable: '50%'}"},
		{name: "int-or-string rejects other strings", spec: "podDisruptionBudget: {minAvailable: half}", wantErr: "spec.podDisruptionBudget.minAvailable"},
		{name: "unknown key is pruned", spec: "replicas: 2\nimage: {name: x}", wantUnknown: []string{"spec.image.name", "spec.replicas"}},
		{
			name: "free-form values survive",
			spec: "resources: {limits: {cpu: '1'}}\ntolerations: [{key: a, operator: Exists}]\naffinity: {nodeAffinity: {}}",
			check: func(t *testing.T, obj map[string]any) {
				spec := obj["spec"].(map[string]any)
				if !jsonEqual(spec["resources"], map[string]any{"limits": map[string]any{"cpu": "1"}}) ||
					!jsonEqual(spec["tolerations"], []any{map[string]any{"key": "a", "operator": "Exists"}}) {
					t.Errorf("spec = %v", spec)
				}
			},
		},
		{
			name:   "status keeps fields written by others",
			spec:   "{}",
			status: "observedGeneration: 1\nconditions: [{type: Ready, status: 'True', reason: InstallSuccessful, message: ok, lastTransitionTime: '2024-01-01T00:00:00Z'}]\nfromHook: {x: 1}",
			check: func(t *testing.T, obj map[string]any) {
				if _, ok := obj["status"].(map[string]any)["fromHook"]; !ok {
					t.Error("status.fromHook was pruned")
				}
			},
		},
		{name: "condition status enum", spec: "{}", status: "conditions: [{type: Ready, status: Yes, reason: R, message: m, lastTransitionTime: '2024-01-01T00:00:00Z'}]",
			wantErr: "status.conditions[0].status"},
		{name: "condition required fields", spec: "{}", status: "conditions: [{type: Ready, status: 'True'}]", wantErr: "status.conditions[0].reason"},
		{name: "failed action enum", spec: "{}", status: "failedRelease: {action: rollback}", wantErr: "status.failedRelease.action"},
		{name: "notReady bounded", spec: "{}", status: "resources: {notReady: [{},{},{},{},{},{},{},{},{},{},{}]}", wantErr: "status.resources.notReady"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := map[string]any{
				"apiVersion": "web.helmapp.io/v1alpha1", "kind": "Nginx",
				"metadata": map[string]any{"name": "web", "namespace": "default"},
				"spec":     fromYAML(t, tt.spec),
			}
			if tt.status != "" {
				obj["status"] = fromYAML(t, tt.status)
			}
			unknown, errs := admit(t, crd, obj)
			switch {
			case tt.wantErr == "" && len(errs) > 0:
				t.Fatalf("rejected: %v", errs.ToAggregate())
			case tt.wantErr != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tt.wantErr)):
				t.Fatalf("errors = %v, want one about %s", errs.ToAggregate(), tt.wantErr)
			}
			if !reflect.DeepEqual(unknown, tt.wantUnknown) {
				t.Errorf("pruned %v, want %v", unknown, tt.wantUnknown)
			}
			if tt.check != nil {
				tt.check(t, obj)
			}
		})
	}
}

func TestCRDValidatesConvertedShapes(t *testing.T) {
	// A chart schema using every conversion at once must still give a CRD
	// the apiserver accepts.
	raw := `{
	  "type": "object", "additionalProperties": false,
	  "definitions": {"port": {"type": "integer", "minimum": 1, "maximum": 65535}},
	  "properties": {
	    "port": {"$ref": "#/definitions/port", "description": "Port.", "default": 80},
	    "open": {"type": "object", "properties": {"a": {"type": "string", "default": "x"}}},
	    "labels": {"type": "object", "additionalProperties": {"type": "string"}, "default": {"a": "b"}},
	    "any": {"description": "Anything."},
	    "list": {"type": "array", "items": {}},
	    "set": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "default": ["a"]},
	    "maybe": {"type": ["string", "null"], "default": null},
	    "size": {"type": ["integer", "string"], "default": "10%", "pattern": "^[0-9]+%$"},
	    "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "default": 0.5},
	    "mode": {"type": "string", "const": "on", "default": "on", "title": "Mode"},
	    "site": {"type": "string", "format": "uri", "maxLength": 200},
	    "union": {"type": ["object", "string", "null"], "description": "Degraded.", "default": "x"},
	    "onlyNull": {"type": "null"},
	    "ipOrName": {"type": "string", "oneOf": [{"format": "ipv4"}, {"pattern": "^[a-z]+$"}], "default": "a"},
	    "percent": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": "^[0-9]+%$"}, {"type": "null"}]},
	    "merged": {"allOf": [{"$ref": "#/definitions/port"}, {"maximum": 1024}]},
	    "byPattern": {"type": "object", "patternProperties": {".*": {"type": "integer"}}},
	    "mixed": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "integer"}},
	    "tuple": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
	    "cond": {"type": "object", "if": {"required": ["a"]}, "then": {"required": ["b"]}},
	    "remote": {"$ref": "https://example.com/x.json"}
	  }
	}`
	w := watches.Watch{
		GroupVersionKind: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Thing"},
		Chart:            &chart.Chart{Metadata: &chart.Metadata{Name: "thing", Version: "1.2.3"}, Schema: []byte(raw)},
	}
	crd, err := CRD(w)
	if err != nil {
		t.Fatal(err)
	}
	if errs := validateCRD(t, crd); len(errs) > 0 {
		t.Fatalf("the apiserver would reject the CRD:\n%v", errs.ToAggregate())
	}

	// A structurally invalid schema must fail the same check, so the check
	// above means something.
	bad := crd.DeepCopy()
	spec := bad.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	spec.Properties["any"] = apiextensionsv1.JSONSchemaProps{Description: "no type"}
	bad.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	if errs := validateCRD(t, bad); len(errs) == 0 {
		t.Error("a property without a type passed validation")
	}

	// A chart without a schema gets a free-form spec.
	w.Chart.Schema = nil
	crd, err = CRD(w)
	if err != nil {
		t.Fatal(err)
	}
	s := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	if s.XPreserveUnknownFields == nil || !*s.XPreserveUnknownFields || !strings.Contains(s.Description, "no values.schema.json") {
		t.Errorf("spec = %+v", s)
	}
	if errs := validateCRD(t, crd); len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
}

// TestCRDLeavesOutWhatTheAPIServerRefuses: a default that does not fit its
// schema (Helm never checks one) and an ECMA-only pattern would make the API
// server refuse the whole CRD; they are left out, with a note each.
func TestCRDLeavesOutWhatTheAPIServerRefuses(t *testing.T) {
	raw := `{"type": "object", "properties": {
	  "a": {"type": "integer", "default": ""},
	  "b": {"type": "string", "pattern": "^(?!kube-).*$", "default": "x"},
	  "c": {"type": "object", "properties": {"d": {"type": "array", "items": {"type": "string", "enum": ["x"], "default": "y"}}}},
	  "e": {"type": "object", "properties": {"f": {"type": "string"}}, "default": {"f": 1}}
	}}`
	w := watches.Watch{
		GroupVersionKind: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Thing"},
		Chart:            &chart.Chart{Metadata: &chart.Metadata{Name: "thing", Version: "1.0.0"}, Schema: []byte(raw)},
	}
	crd, err := CRD(w)
	if err != nil {
		t.Fatal(err)
	}
	if errs := validateCRD(t, crd); len(errs) > 0 {
		t.Fatalf("the apiserver would reject the CRD:\n%v", errs.ToAggregate())
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	if spec.Properties["b"].Default == nil || spec.Properties["b"].Pattern != "" {
		t.Errorf("b = %+v, want its default kept and its pattern dropped", spec.Properties["b"])
	}
	notes, _ := SpecNotes(w.Chart)
	want := []string{
		"values.a: default \"\" does not fit its own schema",
		"values.b: pattern \"^(?!kube-).*$\" is not an RE2 regular expression",
		"values.c.d[]: default \"y\" does not fit",
		"values.e: default {\"f\":1} does not fit",
	}
	for _, w := range want {
		if !strings.Contains(strings.Join(notes, "\n"), w) {
			t.Errorf("no note %q in:\n%s", w, strings.Join(notes, "\n"))
		}
	}
}

func TestCRDErrors(t *testing.T) {
	ok := &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "1.0.0"}}
	tests := []struct {
		name    string
		w       watches.Watch
		wantErr string
	}{
		{"chart not loaded", watches.Watch{GroupVersionKind: schema.GroupVersionKind{Group: "g", Version: "v1", Kind: "K"}}, "not loaded"},
		{"no group", watches.Watch{GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "K"}, Chart: ok}, "needs a group"},
		{"not a schema", watches.Watch{GroupVersionKind: schema.GroupVersionKind{Group: "g", Version: "v1", Kind: "K"}, ChartPath: "charts/c",
			Chart: &chart.Chart{Metadata: ok.Metadata, Schema: []byte(`{"type": "string"}`)}},
			`g/v1, Kind=K: chart charts/c: values.schema.json must describe an object`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CRD(tt.w)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestPrinterColumns(t *testing.T) {
	want := []string{
		`Ready string .status.conditions[?(@.type=="Ready")].status`,
		`Reason string .status.conditions[?(@.type=="Ready")].reason`,
		`Revision integer .status.deployedRelease.revision`,
		`Chart Version string .status.deployedRelease.chartVersion`,
		`Age date .metadata.creationTimestamp`,
	}
	var got []string
	for _, c := range PrinterColumns() {
		got = append(got, c.Name+" "+c.Type+" "+c.JSONPath)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("columns:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSamplesAreAdmitted checks that the samples in config/samples pass the
// generated CRDs with no field pruned.
func TestSamplesAreAdmitted(t *testing.T) {
	for _, tt := range []struct{ kind, chart, sample string }{
		{"Nginx", "../../../helm-charts/nginx", "../../../config/samples/web_v1alpha1_nginx.yaml"},
		{"Echo", "../../../helm-charts/echo", "../../../config/samples/web_v1alpha1_echo.yaml"},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			data, err := os.ReadFile(tt.sample)
			if err != nil {
				t.Fatalf("every kind needs a sample in config/samples: %v", err)
			}
			crd, err := CRD(loadWatch(t, tt.kind, tt.chart))
			if err != nil {
				t.Fatal(err)
			}
			obj := fromYAML(t, string(data))
			unknown, errs := admit(t, crd, obj)
			if len(errs) > 0 || len(unknown) > 0 {
				t.Errorf("%s: errors %v, unknown fields %v", tt.sample, errs.ToAggregate(), unknown)
			}
		})
	}
}

func fromYAML(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	var na, nb any
	_ = json.Unmarshal(ja, &na)
	_ = json.Unmarshal(jb, &nb)
	return reflect.DeepEqual(na, nb)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
