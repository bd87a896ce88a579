package chartrbac

import (
	"sort"
	"strings"
)

// BuiltinKubeVersion is the Kubernetes release whose API the built-in table
// lists (TestBuiltinTableMatchesTheAPIServer checks it against the
// kube-apiserver of the project's control plane), and the version the
// chart is rendered for (.Capabilities.KubeVersion).
const BuiltinKubeVersion = "v1.36.3"

// apiKind is one kind a kube-apiserver serves: its group, version, kind,
// resource name and whether it is namespaced.
type apiKind struct {
	Group, Version, Kind, Resource string
	Namespaced                     bool
}

// builtinKinds are the kinds a kube-apiserver serves with its default
// settings that can be created (every resource with the create verb), as
// its discovery lists them. Generated from discovery once and kept honest
// by TestBuiltinTableMatchesTheAPIServer, in both directions.
var builtinKinds = []apiKind{
	{"admissionregistration.k8s.io", "v1", "MutatingAdmissionPolicy", "mutatingadmissionpolicies", false},
	{"admissionregistration.k8s.io", "v1", "MutatingAdmissionPolicyBinding", "mutatingadmissionpolicybindings", false},
	{"admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", false},
	{"admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", false},
	{"admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings", false},
	{"admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration", "validatingwebhookconfigurations", false},
	{"apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false},
	{"apiregistration.k8s.io", "v1", "APIService", "apiservices", false},
	{"apps", "v1", "ControllerRevision", "controllerrevisions", true},
	{"apps", "v1", "DaemonSet", "daemonsets", true},
	{"apps", "v1", "Deployment", "deployments", true},
	{"apps", "v1", "ReplicaSet", "replicasets", true},
	{"apps", "v1", "StatefulSet", "statefulsets", true},
	{"authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", false},
	{"authentication.k8s.io", "v1", "TokenReview", "tokenreviews", false},
	{"authorization.k8s.io", "v1", "LocalSubjectAccessReview", "localsubjectaccessreviews", true},
	{"authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", false},
	{"authorization.k8s.io", "v1", "SelfSubjectRulesReview", "selfsubjectrulesreviews", false},
	{"authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews", false},
	{"autoscaling", "v1", "HorizontalPodAutoscaler", "horizontalpodautoscalers", true},
	{"autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", true},
	{"batch", "v1", "CronJob", "cronjobs", true},
	{"batch", "v1", "Job", "jobs", true},
	{"certificates.k8s.io", "v1", "CertificateSigningRequest", "certificatesigningrequests", false},
	{"coordination.k8s.io", "v1", "Lease", "leases", true},
	{"discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", true},
	{"events.k8s.io", "v1", "Event", "events", true},
	{"flowcontrol.apiserver.k8s.io", "v1", "FlowSchema", "flowschemas", false},
	{"flowcontrol.apiserver.k8s.io", "v1", "PriorityLevelConfiguration", "prioritylevelconfigurations", false},
	{"networking.k8s.io", "v1", "IPAddress", "ipaddresses", false},
	{"networking.k8s.io", "v1", "Ingress", "ingresses", true},
	{"networking.k8s.io", "v1", "IngressClass", "ingressclasses", false},
	{"networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", true},
	{"networking.k8s.io", "v1", "ServiceCIDR", "servicecidrs", false},
	{"node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", false},
	{"policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", true},
	{"rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false},
	{"rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false},
	{"rbac.authorization.k8s.io", "v1", "Role", "roles", true},
	{"rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", true},
	{"resource.k8s.io", "v1", "DeviceClass", "deviceclasses", false},
	{"resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", true},
	{"resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", true},
	{"resource.k8s.io", "v1", "ResourceSlice", "resourceslices", false},
	{"scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", false},
	{"storage.k8s.io", "v1", "CSIDriver", "csidrivers", false},
	{"storage.k8s.io", "v1", "CSINode", "csinodes", false},
	{"storage.k8s.io", "v1", "CSIStorageCapacity", "csistoragecapacities", true},
	{"storage.k8s.io", "v1", "StorageClass", "storageclasses", false},
	{"storage.k8s.io", "v1", "VolumeAttachment", "volumeattachments", false},
	{"storage.k8s.io", "v1", "VolumeAttributesClass", "volumeattributesclasses", false},
	{"", "v1", "Binding", "bindings", true},
	{"", "v1", "ConfigMap", "configmaps", true},
	{"", "v1", "Endpoints", "endpoints", true},
	{"", "v1", "Event", "events", true},
	{"", "v1", "LimitRange", "limitranges", true},
	{"", "v1", "Namespace", "namespaces", false},
	{"", "v1", "Node", "nodes", false},
	{"", "v1", "PersistentVolume", "persistentvolumes", false},
	{"", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true},
	{"", "v1", "Pod", "pods", true},
	{"", "v1", "PodTemplate", "podtemplates", true},
	{"", "v1", "ReplicationController", "replicationcontrollers", true},
	{"", "v1", "ResourceQuota", "resourcequotas", true},
	{"", "v1", "Secret", "secrets", true},
	{"", "v1", "Service", "services", true},
	{"", "v1", "ServiceAccount", "serviceaccounts", true},
}

// kindTable maps group/version/kind to what a cluster serves: the built-in
// kinds and the chart's own CRDs.
type kindTable struct {
	byGVK map[string]apiKind
	// versions of group/kind, for an error that names the served ones.
	versions map[string][]string
}

func gvkKey(group, version, kind string) string { return group + "/" + version + "/" + kind }

func newKindTable(extra []apiKind) *kindTable {
	t := &kindTable{byGVK: map[string]apiKind{}, versions: map[string][]string{}}
	for _, k := range append(append([]apiKind{}, builtinKinds...), extra...) {
		key := gvkKey(k.Group, k.Version, k.Kind)
		if _, dup := t.byGVK[key]; dup {
			continue
		}
		t.byGVK[key] = k
		gk := k.Group + "/" + k.Kind
		t.versions[gk] = append(t.versions[gk], k.Version)
	}
	for _, v := range t.versions {
		sort.Strings(v)
	}
	return t
}

// lookup returns the kind served as group/version kind; when it is not,
// why (a version not served, or a kind no one serves).
func (t *kindTable) lookup(group, version, kind string) (apiKind, string) {
	if k, ok := t.byGVK[gvkKey(group, version, kind)]; ok {
		return k, ""
	}
	gv := version
	if group != "" {
		gv = group + "/" + version
	}
	if vs := t.versions[group+"/"+kind]; len(vs) > 0 {
		return apiKind{}, kind + " " + gv + ": Kubernetes " + BuiltinKubeVersion + " and the chart's CRDs serve only " + strings.Join(vs, ", ")
	}
	if builtinGroup(group) {
		return apiKind{}, kind + " " + gv + ": Kubernetes " + BuiltinKubeVersion + " does not serve it (an API since removed?)"
	}
	return apiKind{}, kind + " " + gv + ": not a Kubernetes " + BuiltinKubeVersion + " kind nor one of the chart's CRDs (a CRD someone else installs?); add its rule by hand"
}

// builtinGroup says whether group is one of Kubernetes' own API groups.
func builtinGroup(group string) bool {
	if group == "" || strings.HasSuffix(group, ".k8s.io") {
		return true
	}
	for _, k := range builtinKinds {
		if k.Group == group {
			return true
		}
	}
	return false
}
