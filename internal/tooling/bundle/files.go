package bundle

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/operator-framework/api/pkg/operators/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	sigsyaml "sigs.k8s.io/yaml"
)

// Annotation keys of metadata/annotations.yaml (and bundle.Dockerfile labels).
const (
	KeyMediatype         = "operators.operatorframework.io.bundle.mediatype.v1"
	KeyManifests         = "operators.operatorframework.io.bundle.manifests.v1"
	KeyMetadata          = "operators.operatorframework.io.bundle.metadata.v1"
	KeyPackage           = "operators.operatorframework.io.bundle.package.v1"
	KeyChannels          = "operators.operatorframework.io.bundle.channels.v1"
	KeyDefaultChannel    = "operators.operatorframework.io.bundle.channel.default.v1"
	KeyTestMediatype     = "operators.operatorframework.io.test.mediatype.v1"
	KeyTestConfig        = "operators.operatorframework.io.test.config.v1"
	KeyOpenShiftVersions = "com.redhat.openshift.versions"
)

// shippable are the kinds OLM installs from a registry+v1 bundle (operator-
// registry's supported resources), with whether they are namespaced.
// NetworkPolicy is deliberately absent: OperatorHub's pipeline rejects it.
var shippable = map[string]bool{
	"Secret": true, "ConfigMap": true, "ServiceAccount": true, "Service": true,
	"Role": true, "RoleBinding": true, "PrometheusRule": true, "ServiceMonitor": true,
	"PodDisruptionBudget": true, "VerticalPodAutoscaler": true,
	"ClusterRole": false, "ClusterRoleBinding": false, "PriorityClass": false,
	"ConsoleYAMLSample": false, "ConsoleQuickStart": false, "ConsoleCLIDownload": false,
	"ConsoleLink": false, "ConsolePlugin": false,
}

func namespaced(kind string) bool { return shippable[kind] }

// checkShippable refuses objects a bundle must not carry.
func checkShippable(o *unstructured.Unstructured, serviceAccounts []string) error {
	kind := o.GetKind()
	switch _, ok := shippable[kind]; {
	case kind == "NetworkPolicy":
		return fmt.Errorf("NetworkPolicy %s: a bundle must not ship one (OperatorHub's pipeline rejects it); keep it out of config/manifests", o.GetName())
	case kind == "ServiceAccount" && slices.Contains(serviceAccounts, o.GetName()):
		return fmt.Errorf("ServiceAccount %s is the Deployment's: OLM creates it, the bundle must not ship it", o.GetName())
	case !ok:
		return fmt.Errorf("%s %s: OLM cannot install this kind from a bundle", kind, o.GetName())
	}
	return nil
}

// addObject adds o as a YAML file at p.
func (f Files) addObject(p string, o *unstructured.Unstructured) error {
	b, err := sigsyaml.Marshal(o.Object)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	f[p] = append([]byte(header), b...)
	return nil
}

// marshalCSV renders the CSV as YAML without the empty fields the Go types
// carry (creationTimestamp: null, status).
func marshalCSV(csv *v1alpha1.ClusterServiceVersion) ([]byte, error) {
	js, err := json.Marshal(csv)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	dropNullTimestamps(m)
	b, err := sigsyaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append([]byte(header), b...), nil
}

// dropNullTimestamps removes every `creationTimestamp: null` under v.
func dropNullTimestamps(v any) {
	switch t := v.(type) {
	case map[string]any:
		if ts, ok := t["creationTimestamp"]; ok && ts == nil {
			delete(t, "creationTimestamp")
		}
		for _, x := range t {
			dropNullTimestamps(x)
		}
	case []any:
		for _, x := range t {
			dropNullTimestamps(x)
		}
	}
}

// label is one bundle annotation, with the comment of its group.
type label struct{ comment, key, value string }

// bundleLabels are the bundle's annotations, in file order.
func bundleLabels(pkg string, opts Options) []label {
	ls := []label{
		{"Core bundle annotations.", KeyMediatype, "registry+v1"},
		{"", KeyManifests, "manifests/"},
		{"", KeyMetadata, "metadata/"},
		{"", KeyPackage, pkg},
		{"", KeyChannels, strings.Join(opts.Channels, ",")},
		{"", KeyDefaultChannel, opts.DefaultChannel},
		{"Annotations for testing (operator-sdk scorecard).", KeyTestMediatype, "scorecard+v1"},
		{"", KeyTestConfig, "tests/scorecard/"},
	}
	if opts.OpenShiftVersions != "" {
		ls = append(ls, label{"OpenShift versions whose catalogs include this bundle.", KeyOpenShiftVersions, opts.OpenShiftVersions})
	}
	return ls
}

// annotationsYAML renders metadata/annotations.yaml.
func annotationsYAML(ls []label) []byte {
	var b strings.Builder
	b.WriteString(header + "annotations:\n")
	for _, l := range ls {
		if l.comment != "" {
			b.WriteString("  # " + l.comment + "\n")
		}
		kv, _ := sigsyaml.Marshal(map[string]string{l.key: l.value})
		b.WriteString("  " + string(kv))
	}
	return []byte(b.String())
}

// dockerfile renders bundle.Dockerfile: the annotations as labels and the
// bundle's directories.
func dockerfile(ls []label) []byte {
	var b strings.Builder
	b.WriteString(header + "FROM scratch\n")
	for _, l := range ls {
		if l.comment != "" {
			b.WriteString("\n# " + l.comment + "\n")
		}
		v, _ := json.Marshal(l.value)
		b.WriteString("LABEL " + l.key + "=" + string(v) + "\n")
	}
	b.WriteString("\n# Copy files to the locations the labels name.\n")
	b.WriteString("COPY " + ManifestsDir + " /manifests/\n")
	b.WriteString("COPY " + MetadataDir + " /metadata/\n")
	b.WriteString("COPY " + ScorecardDir + " /tests/scorecard/\n")
	return []byte(b.String())
}

// ReadAnnotations reads bundle/metadata/annotations.yaml under root.
func ReadAnnotations(root string) (map[string]string, error) {
	return ReadBundleAnnotations(filepath.Join(root, BundleDir))
}

// ReadBundleAnnotations reads metadata/annotations.yaml of the bundle
// directory dir.
func ReadBundleAnnotations(dir string) (map[string]string, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "metadata", "annotations.yaml"))
	if err != nil {
		return nil, err
	}
	var f struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := sigsyaml.UnmarshalStrict(raw, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", AnnotationsYAML, err)
	}
	return f.Annotations, nil
}

// ReadCSV reads the bundle's ClusterServiceVersion under root.
func ReadCSV(root string) (*v1alpha1.ClusterServiceVersion, error) {
	return ReadBundleCSV(filepath.Join(root, BundleDir))
}

// ReadBundleCSV reads the ClusterServiceVersion of the bundle directory dir
// (the one holding manifests/ and metadata/).
func ReadBundleCSV(dir string) (*v1alpha1.ClusterServiceVersion, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "manifests", "*.clusterserviceversion.yaml"))
	if err != nil {
		return nil, err
	}
	if len(matches) != 1 {
		return nil, fmt.Errorf("%s: want one *.clusterserviceversion.yaml, found %d", filepath.Join(dir, "manifests"), len(matches))
	}
	raw, err := os.ReadFile(matches[0])
	if err != nil {
		return nil, err
	}
	csv := &v1alpha1.ClusterServiceVersion{}
	if err := sigsyaml.Unmarshal(raw, csv); err != nil {
		return nil, fmt.Errorf("%s: %w", matches[0], err)
	}
	return csv, nil
}

// OptionsFromBundle returns the Options the bundle under root was generated
// with (version, image, channels, OpenShift versions, createdAt), so that it
// can be generated again for comparison.
func OptionsFromBundle(root string) (Options, error) {
	csv, err := ReadCSV(root)
	if err != nil {
		return Options{}, err
	}
	ann, err := ReadAnnotations(root)
	if err != nil {
		return Options{}, err
	}
	created, err := time.Parse(time.RFC3339, csv.Annotations["createdAt"])
	if err != nil {
		return Options{}, fmt.Errorf("the CSV's createdAt: %w", err)
	}
	return Options{
		Root:              root,
		Version:           csv.Spec.Version.String(),
		Image:             csv.Annotations["containerImage"],
		Channels:          strings.Split(ann[KeyChannels], ","),
		DefaultChannel:    ann[KeyDefaultChannel],
		OpenShiftVersions: ann[KeyOpenShiftVersions],
		CreatedAt:         created,
		Replaces:          csv.Spec.Replaces,
		SkipRange:         csv.Annotations[skipRangeAnnotation],
	}, nil
}
