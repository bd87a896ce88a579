package crdgen

import (
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Chart.yaml annotations a chart may set to shape the names of its CRD.
const (
	// AnnotationShortNames is a comma-separated list of short names, e.g. "ngx".
	AnnotationShortNames = "helmapp.io/crd-short-names"
	// AnnotationPlural overrides the plural that Pluralize guesses, for kinds
	// with an irregular plural.
	AnnotationPlural = "helmapp.io/crd-plural"
)

// Category is listed in every generated CRD, so `kubectl get helmapp` lists
// every resource this operator reconciles.
const Category = "helmapp"

// oExceptions are nouns ending in consonant+"o" whose plural takes only "s".
var oExceptions = map[string]bool{
	"photo": true, "piano": true, "halo": true, "repo": true, "memo": true,
	"logo": true, "demo": true, "disco": true, "memento": true, "kilo": true,
	"solo": true, "zero": true, "proto": true, "info": true, "typo": true,
}

// Pluralize returns the lowercase English plural of a kind, as a resource name:
// "Nginx" → "nginxes", "Echo" → "echoes", "Policy" → "policies", "Gateway" →
// "gateways", "App" → "apps". Irregular plurals need AnnotationPlural.
func Pluralize(kind string) string {
	s := strings.ToLower(kind)
	if s == "" {
		return s
	}
	last := s[len(s)-1]
	prevIsConsonant := len(s) >= 2 && !strings.ContainsRune("aeiou", rune(s[len(s)-2]))
	switch {
	case strings.HasSuffix(s, "s"), strings.HasSuffix(s, "x"), strings.HasSuffix(s, "z"),
		strings.HasSuffix(s, "ch"), strings.HasSuffix(s, "sh"):
		return s + "es"
	case last == 'y' && prevIsConsonant:
		return s[:len(s)-1] + "ies"
	case last == 'o' && prevIsConsonant && !endsInOException(s):
		return s + "es"
	default:
		return s + "s"
	}
}

// endsInOException reports whether s, possibly a compound such as "gitrepo",
// ends in one of oExceptions.
func endsInOException(s string) bool {
	for w := range oExceptions {
		if strings.HasSuffix(s, w) {
			return true
		}
	}
	return false
}

// Names returns the CRD names of kind, taking overrides from the chart's
// annotations (AnnotationPlural, AnnotationShortNames).
func Names(kind string, md *chart.Metadata) (apiextensionsv1.CustomResourceDefinitionNames, error) {
	if kind == "" {
		return apiextensionsv1.CustomResourceDefinitionNames{}, fmt.Errorf("kind must not be empty")
	}
	names := apiextensionsv1.CustomResourceDefinitionNames{
		Kind:       kind,
		ListKind:   kind + "List",
		Singular:   strings.ToLower(kind),
		Plural:     Pluralize(kind),
		Categories: []string{Category},
	}
	if md == nil {
		return names, nil
	}
	if p := strings.TrimSpace(md.Annotations[AnnotationPlural]); p != "" {
		names.Plural = p
	}
	for _, sn := range strings.Split(md.Annotations[AnnotationShortNames], ",") {
		if sn = strings.TrimSpace(sn); sn != "" {
			names.ShortNames = append(names.ShortNames, sn)
		}
	}
	return names, nil
}
