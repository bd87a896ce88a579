package charts

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

const (
	nginxDir  = "../../../helm-charts/nginx"
	echoDir   = "../../../helm-charts/echo"
	release   = "web"
	namespace = "team-a"
)

// strict decodes manifests into typed objects and fails on unknown or
// duplicate fields, so a misspelt field in a template is caught here.
var strict = serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()

// render renders a chart and decodes every object, keyed by kind.
func render(t *testing.T, dir string, values map[string]any) (map[string]runtime.Object, *Rendered) {
	t.Helper()
	r, err := Render(dir, release, namespace, values)
	if err != nil {
		t.Fatalf("render %s: %v", dir, err)
	}
	objs := map[string]runtime.Object{}
	for _, m := range r.Manifests {
		obj, gvk, err := strict.Decode([]byte(m), nil, nil)
		if err != nil {
			t.Fatalf("decode strictly:\n%s\n%v", m, err)
		}
		if _, dup := objs[gvk.Kind]; dup {
			t.Fatalf("two objects of kind %s", gvk.Kind)
		}
		objs[gvk.Kind] = obj
	}
	return objs, r
}

func kinds(objs map[string]runtime.Object) []string {
	var ks []string
	for k := range objs {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func TestDefaultValues(t *testing.T) {
	tests := []struct {
		dir       string
		chartName string
		wantKinds []string
	}{
		{nginxDir, "nginx", []string{"ConfigMap", "Deployment", "Service", "ServiceAccount"}},
		{echoDir, "echo", []string{"ConfigMap", "Deployment"}},
	}
	for _, tt := range tests {
		t.Run(tt.chartName, func(t *testing.T) {
			objs, r := render(t, tt.dir, nil)
			if got := kinds(objs); !reflect.DeepEqual(got, tt.wantKinds) {
				t.Errorf("kinds = %v, want %v", got, tt.wantKinds)
			}
			for kind, obj := range objs {
				m, err := metaOf(obj)
				if err != nil {
					t.Fatal(err)
				}
				if m.GetName() != release || m.GetNamespace() != namespace {
					t.Errorf("%s is %s/%s, want %s/%s", kind, m.GetNamespace(), m.GetName(), namespace, release)
				}
				wantLabels := map[string]string{
					"app.kubernetes.io/managed-by": "Helm",
					"app.kubernetes.io/instance":   release,
					"app.kubernetes.io/name":       tt.chartName,
					"helm.sh/chart":                tt.chartName + "-0.1.0",
				}
				for k, v := range wantLabels {
					if got := m.GetLabels()[k]; got != v {
						t.Errorf("%s label %s = %q, want %q", kind, k, got, v)
					}
				}
				if _, ok := m.GetLabels()["app.kubernetes.io/version"]; !ok {
					t.Errorf("%s has no app.kubernetes.io/version label", kind)
				}
			}
			dep := objs["Deployment"].(*appsv1.Deployment)
			if dep.Spec.Replicas == nil || *dep.Spec.Replicas != 1 {
				t.Errorf("replicas = %v, want 1", dep.Spec.Replicas)
			}
			if !reflect.DeepEqual(dep.Spec.Selector.MatchLabels, map[string]string{
				"app.kubernetes.io/name": tt.chartName, "app.kubernetes.io/instance": release,
			}) {
				t.Errorf("selector = %v", dep.Spec.Selector.MatchLabels)
			}
			for k, v := range dep.Spec.Selector.MatchLabels {
				if dep.Spec.Template.Labels[k] != v {
					t.Errorf("pod template lacks selector label %s=%s", k, v)
				}
			}
			if strings.Count(strings.TrimSpace(r.Notes), "\n") != 0 || r.Notes == "" {
				t.Errorf("NOTES.txt should render to one line, got %q", r.Notes)
			}
		})
	}
}

func TestNginxDefaults(t *testing.T) {
	objs, _ := render(t, nginxDir, nil)
	dep := objs["Deployment"].(*appsv1.Deployment)
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != "docker.io/nginxinc/nginx-unprivileged:1.27.3" || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("image = %s (%s)", c.Image, c.ImagePullPolicy)
	}
	if pod.ServiceAccountName != release {
		t.Errorf("serviceAccountName = %q, want %q", pod.ServiceAccountName, release)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("ports = %+v, want http on 8080 (an unprivileged process cannot bind 80)", c.Ports)
	}
	if c.ReadinessProbe.HTTPGet.Port != intstr.FromString("http") || c.LivenessProbe.HTTPGet.Port != intstr.FromString("http") {
		t.Errorf("probes do not use the http port: %+v %+v", c.ReadinessProbe, c.LivenessProbe)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/usr/share/nginx/html" {
		t.Errorf("volume mounts = %+v", c.VolumeMounts)
	}
	if pod.Volumes[0].ConfigMap == nil || pod.Volumes[0].ConfigMap.Name != release {
		t.Errorf("page volume = %+v", pod.Volumes[0])
	}
	if dep.Spec.Template.Annotations["checksum/page"] == "" {
		t.Error("pod template has no checksum/page annotation")
	}
	svc := objs["Service"].(*corev1.Service)
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || svc.Spec.Ports[0].Port != 80 ||
		svc.Spec.Ports[0].TargetPort != intstr.FromString("http") {
		t.Errorf("service = %+v", svc.Spec)
	}
	cm := objs["ConfigMap"].(*corev1.ConfigMap)
	if !strings.Contains(cm.Data["index.html"], "<h1>Welcome to nginx</h1>") {
		t.Errorf("index.html = %q", cm.Data["index.html"])
	}
}

func TestNginxAllFeatures(t *testing.T) {
	values := map[string]any{
		"replicaCount": 3,
		"image":        map[string]any{"tag": "1.27.4", "pullPolicy": "Always"},
		"service":      map[string]any{"type": "LoadBalancer", "port": 8080},
		"resources": map[string]any{
			"requests": map[string]any{"cpu": "100m", "memory": "64Mi"},
			"limits":   map[string]any{"memory": "128Mi"},
		},
		"ingress": map[string]any{
			"enabled": true, "className": "nginx", "host": "web.example.com", "path": "/app",
			"annotations": map[string]any{"example.com/tls": "true"},
		},
		"autoscaling":         map[string]any{"enabled": true, "minReplicas": 2, "maxReplicas": 6, "targetCPUUtilizationPercentage": 60},
		"podDisruptionBudget": map[string]any{"enabled": true, "minAvailable": 1},
		"nodeSelector":        map[string]any{"kubernetes.io/os": "linux"},
		"tolerations":         []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}},
		"affinity": map[string]any{"podAntiAffinity": map[string]any{"preferredDuringSchedulingIgnoredDuringExecution": []any{
			map[string]any{"weight": 1, "podAffinityTerm": map[string]any{"topologyKey": "kubernetes.io/hostname"}},
		}}},
		"podAnnotations": map[string]any{"example.com/scrape": "true"},
		"serviceAccount": map[string]any{"name": "nginx-sa", "annotations": map[string]any{"example.com/role": "web"}},
	}
	objs, r := render(t, nginxDir, values)
	want := []string{"ConfigMap", "Deployment", "HorizontalPodAutoscaler", "Ingress", "PodDisruptionBudget", "Service", "ServiceAccount"}
	if got := kinds(objs); !reflect.DeepEqual(got, want) {
		t.Fatalf("kinds = %v, want %v", got, want)
	}

	dep := objs["Deployment"].(*appsv1.Deployment)
	if dep.Spec.Replicas != nil {
		t.Errorf("replicas = %d, want unset while the autoscaler owns it", *dep.Spec.Replicas)
	}
	pod := dep.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != "docker.io/nginxinc/nginx-unprivileged:1.27.4" || c.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("image = %s (%s)", c.Image, c.ImagePullPolicy)
	}
	if c.Resources.Requests.Cpu().String() != "100m" || c.Resources.Limits.Memory().String() != "128Mi" {
		t.Errorf("resources = %+v", c.Resources)
	}
	if pod.NodeSelector["kubernetes.io/os"] != "linux" || len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "dedicated" {
		t.Errorf("nodeSelector %v, tolerations %v", pod.NodeSelector, pod.Tolerations)
	}
	if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil {
		t.Errorf("affinity = %+v", pod.Affinity)
	}
	if pod.ServiceAccountName != "nginx-sa" || objs["ServiceAccount"].(*corev1.ServiceAccount).Name != "nginx-sa" {
		t.Errorf("serviceAccountName = %q", pod.ServiceAccountName)
	}
	ann := dep.Spec.Template.Annotations
	if ann["example.com/scrape"] != "true" || ann["checksum/page"] == "" {
		t.Errorf("pod annotations = %v", ann)
	}

	svc := objs["Service"].(*corev1.Service)
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || svc.Spec.Ports[0].Port != 8080 {
		t.Errorf("service = %+v", svc.Spec)
	}

	ing := objs["Ingress"].(*networkingv1.Ingress)
	rule := ing.Spec.Rules[0]
	path := rule.HTTP.Paths[0]
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != "nginx" || rule.Host != "web.example.com" ||
		path.Path != "/app" || *path.PathType != networkingv1.PathTypePrefix ||
		path.Backend.Service.Name != release || path.Backend.Service.Port.Name != "http" ||
		ing.Annotations["example.com/tls"] != "true" {
		t.Errorf("ingress = %+v", ing.Spec)
	}

	hpa := objs["HorizontalPodAutoscaler"].(*autoscalingv2.HorizontalPodAutoscaler)
	if hpa.Spec.ScaleTargetRef.Name != release || *hpa.Spec.MinReplicas != 2 || hpa.Spec.MaxReplicas != 6 ||
		*hpa.Spec.Metrics[0].Resource.Target.AverageUtilization != 60 {
		t.Errorf("hpa = %+v", hpa.Spec)
	}

	pdb := objs["PodDisruptionBudget"].(*policyv1.PodDisruptionBudget)
	if *pdb.Spec.MinAvailable != intstr.FromInt32(1) ||
		!reflect.DeepEqual(pdb.Spec.Selector.MatchLabels, dep.Spec.Selector.MatchLabels) {
		t.Errorf("pdb = %+v", pdb.Spec)
	}
	if !strings.Contains(r.Notes, "http://web.example.com/app") {
		t.Errorf("notes = %q", r.Notes)
	}
}

func TestNginxServiceAccountNotCreated(t *testing.T) {
	objs, _ := render(t, nginxDir, map[string]any{"serviceAccount": map[string]any{"create": false}})
	if _, ok := objs["ServiceAccount"]; ok {
		t.Error("ServiceAccount rendered with serviceAccount.create=false")
	}
	if got := objs["Deployment"].(*appsv1.Deployment).Spec.Template.Spec.ServiceAccountName; got != "default" {
		t.Errorf("serviceAccountName = %q, want default", got)
	}
}

func TestNginxPageChangeRollsPods(t *testing.T) {
	checksum := func(title string) (string, string) {
		objs, _ := render(t, nginxDir, map[string]any{"page": map[string]any{"title": title}})
		return objs["Deployment"].(*appsv1.Deployment).Spec.Template.Annotations["checksum/page"],
			objs["ConfigMap"].(*corev1.ConfigMap).Data["index.html"]
	}
	a, _ := checksum("One")
	b, html := checksum(`<script>alert("x")</script>`)
	if a == b {
		t.Error("checksum/page did not change with the page")
	}
	if strings.Contains(html, "<script>") || !strings.Contains(html, "&lt;script&gt;") {
		t.Errorf("page title is not HTML-escaped: %s", html)
	}
}

func TestNginxPDBPercentage(t *testing.T) {
	objs, _ := render(t, nginxDir, map[string]any{"podDisruptionBudget": map[string]any{"enabled": true, "minAvailable": "50%"}})
	if got := *objs["PodDisruptionBudget"].(*policyv1.PodDisruptionBudget).Spec.MinAvailable; got != intstr.FromString("50%") {
		t.Errorf("minAvailable = %v, want 50%%", got.String())
	}
}

func TestEchoMessage(t *testing.T) {
	objs, _ := render(t, echoDir, map[string]any{"message": `say "hi"`, "replicaCount": 2})
	if got := objs["ConfigMap"].(*corev1.ConfigMap).Data["message"]; got != `say "hi"` {
		t.Errorf("message = %q", got)
	}
	dep := objs["Deployment"].(*appsv1.Deployment)
	c := dep.Spec.Template.Spec.Containers[0]
	if *dep.Spec.Replicas != 2 || c.Image != "docker.io/hashicorp/http-echo:1.0.0" ||
		!reflect.DeepEqual(c.Args, []string{"-listen=:5678", "-text=$(MESSAGE)"}) ||
		c.Env[0].ValueFrom.ConfigMapKeyRef.Name != release {
		t.Errorf("deployment = %+v", dep.Spec)
	}
	other, _ := render(t, echoDir, map[string]any{"message": "bye"})
	if dep.Spec.Template.Annotations["checksum/message"] == other["Deployment"].(*appsv1.Deployment).Spec.Template.Annotations["checksum/message"] {
		t.Error("checksum/message did not change with the message")
	}
}

// TestImageReference checks that image.reference, which the operator sets
// from its RELATED_IMAGE_* variables, replaces repository and tag, and that
// its empty default (the variable unset) leaves them in charge.
func TestImageReference(t *testing.T) {
	const digest = "mirror.example.com/web@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, dir := range []string{nginxDir, echoDir} {
		objs, _ := render(t, dir, map[string]any{"image": map[string]any{"reference": digest, "tag": "9.9"}})
		if got := objs["Deployment"].(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Image; got != digest {
			t.Errorf("%s: image = %q, want the reference %q", dir, got, digest)
		}
		objs, _ = render(t, dir, map[string]any{"image": map[string]any{"reference": "", "tag": "9.9"}})
		if got := objs["Deployment"].(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(got, ":9.9") {
			t.Errorf("%s: image = %q with an empty reference, want repository:9.9", dir, got)
		}
	}
}

// TestInvalidValues checks that the values schema rejects bad values before
// anything renders, with an error that names the value.
func TestInvalidValues(t *testing.T) {
	tests := []struct {
		name   string
		dir    string
		values map[string]any
		want   []string // substrings of the error
	}{
		{"nginx wrong type", nginxDir, map[string]any{"replicaCount": "three"}, []string{"/replicaCount", "want integer"}},
		{"echo wrong type", echoDir, map[string]any{"replicaCount": "three"}, []string{"/replicaCount", "want integer"}},
		{"negative replicas", nginxDir, map[string]any{"replicaCount": -1}, []string{"/replicaCount", "minimum"}},
		{"unknown top-level key", nginxDir, map[string]any{"replicas": 2}, []string{"replicas"}},
		{"unknown nested key", nginxDir, map[string]any{"image": map[string]any{"name": "x"}}, []string{"/image", "name"}},
		{"enum", nginxDir, map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}, []string{"/image/pullPolicy"}},
		{"service type", nginxDir, map[string]any{"service": map[string]any{"type": "External"}}, []string{"/service/type"}},
		{"port range", nginxDir, map[string]any{"service": map[string]any{"port": 70000}}, []string{"/service/port"}},
		{"annotation value type", nginxDir, map[string]any{"podAnnotations": map[string]any{"a": 1}}, []string{"/podAnnotations/a"}},
		{"pdb percentage", nginxDir, map[string]any{"podDisruptionBudget": map[string]any{"minAvailable": "half"}}, []string{"/podDisruptionBudget/minAvailable"}},
		{"empty message", echoDir, map[string]any{"message": ""}, []string{"/message"}},
		{"autoscaling bounds", nginxDir, map[string]any{"autoscaling": map[string]any{"enabled": true, "minReplicas": 5, "maxReplicas": 2}},
			[]string{"autoscaling.maxReplicas (2) must not be below autoscaling.minReplicas (5)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Render(tt.dir, release, namespace, tt.values)
			if err == nil {
				t.Fatalf("rendered with invalid values %v", tt.values)
			}
			t.Logf("error: %v", err)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestSchemaDescribesEveryValue checks that values.schema.json types,
// describes and defaults every value of values.yaml with the same default,
// and closes every object whose keys are fixed.
func TestSchemaDescribesEveryValue(t *testing.T) {
	for _, dir := range []string{nginxDir, echoDir} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var values map[string]any
			readYAML(t, filepath.Join(dir, "values.yaml"), &values)
			var schema map[string]any
			data, err := os.ReadFile(filepath.Join(dir, "values.schema.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &schema); err != nil {
				t.Fatal(err)
			}
			if schema["$schema"] != "http://json-schema.org/draft-07/schema#" {
				t.Errorf("$schema = %v, want draft-07", schema["$schema"])
			}
			if schema["additionalProperties"] != false {
				t.Error("the root does not set additionalProperties: false")
			}
			checkNode(t, "", schema, values, true)
		})
	}
}

// checkNode checks one schema object node against its value from values.yaml.
func checkNode(t *testing.T, path string, node map[string]any, value any, root bool) {
	t.Helper()
	if !root {
		if d, _ := node["description"].(string); d == "" {
			t.Errorf("%s: no description", path)
		}
		if node["type"] == nil {
			t.Errorf("%s: no type", path)
		}
		def, ok := node["default"]
		if !ok {
			t.Errorf("%s: no default", path)
		} else if !jsonEqual(def, value) {
			t.Errorf("%s: default %v differs from values.yaml %v", path, def, value)
		}
	}
	props, _ := node["properties"].(map[string]any)
	if props == nil {
		return
	}
	if node["additionalProperties"] != false {
		t.Errorf("%s: an object with fixed keys should set additionalProperties: false", path)
	}
	vm, _ := value.(map[string]any)
	for k := range vm {
		if _, ok := props[k]; !ok {
			t.Errorf("%s.%s is in values.yaml but not in the schema", path, k)
		}
	}
	for k, p := range props {
		v, ok := vm[k]
		if !ok {
			t.Errorf("%s.%s is in the schema but not in values.yaml", path, k)
		}
		checkNode(t, path+"."+k, p.(map[string]any), v, false)
	}
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	var na, nb any
	_ = json.Unmarshal(ja, &na)
	_ = json.Unmarshal(jb, &nb)
	return reflect.DeepEqual(na, nb)
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func metaOf(obj runtime.Object) (metav1.Object, error) {
	type metaObject interface {
		runtime.Object
		metav1.Object
	}
	return obj.(metaObject), nil
}
