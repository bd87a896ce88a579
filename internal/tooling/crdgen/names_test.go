package crdgen

import (
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
)

func TestPluralize(t *testing.T) {
	tests := map[string]string{
		"Nginx":      "nginxes",
		"Echo":       "echoes",
		"Redis":      "redises",
		"Match":      "matches",
		"Mesh":       "meshes",
		"Box":        "boxes",
		"Policy":     "policies",
		"Gateway":    "gateways",
		"App":        "apps",
		"Memcached":  "memcacheds",
		"Repo":       "repos",
		"GitRepo":    "gitrepos",
		"Video":      "videos",
		"Database":   "databases",
		"Prometheus": "prometheuses",
		"":           "",
	}
	for kind, want := range tests {
		if got := Pluralize(kind); got != want {
			t.Errorf("Pluralize(%q) = %q, want %q", kind, got, want)
		}
	}
}

func TestNames(t *testing.T) {
	tests := []struct {
		name        string
		kind        string
		annotations map[string]string
		want        func(n *namesWant)
	}{
		{name: "derived", kind: "Nginx", want: func(n *namesWant) {}},
		{name: "short names", kind: "Nginx", annotations: map[string]string{AnnotationShortNames: " ngx, nx ,"},
			want: func(n *namesWant) { n.short = []string{"ngx", "nx"} }},
		{name: "plural override", kind: "Person", annotations: map[string]string{AnnotationPlural: "people"},
			want: func(n *namesWant) { n.plural = "people" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Names(tt.kind, &chart.Metadata{Annotations: tt.annotations})
			if err != nil {
				t.Fatal(err)
			}
			w := namesWant{plural: Pluralize(tt.kind)}
			tt.want(&w)
			if got.Kind != tt.kind || got.ListKind != tt.kind+"List" || got.Plural != w.plural ||
				got.Singular != strings.ToLower(tt.kind) || !reflect.DeepEqual(got.ShortNames, w.short) ||
				!reflect.DeepEqual(got.Categories, []string{"helmapp"}) {
				t.Errorf("Names = %+v, want plural %q short %v", got, w.plural, w.short)
			}
		})
	}
	if _, err := Names("", nil); err == nil {
		t.Error("Names accepted an empty kind")
	}
}

type namesWant struct {
	plural string
	short  []string
}
