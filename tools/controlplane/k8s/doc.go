// Package k8s is the home of small wrapper mains that build Kubernetes
// control plane binaries (kube-apiserver, kube-controller-manager,
// kube-scheduler, kubectl) from the pinned k8s.io/kubernetes module.
//
// hack/controlplane-bins.sh builds them into a per-version cache outside the
// checkout; nothing in the product imports this module.
package k8s
