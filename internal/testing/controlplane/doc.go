// Package controlplane starts a local Kubernetes control plane for tests, the
// demo and the e2e suite, from binaries the project builds itself.
//
// No download site is reachable from where this project is built, so the
// binaries (kube-apiserver, etcd, kubectl and, for a full cluster,
// kube-controller-manager, kube-scheduler and kwok) are compiled from the Go
// modules pinned under tools/controlplane/ by hack/controlplane-bins.sh and
// cached outside the checkout, keyed by version. AssetsDir finds or builds
// them; callers never skip for lack of binaries.
//
// Start brings up etcd and kube-apiserver through controller-runtime's envtest
// and writes an admin kubeconfig. With Options.Full it also runs
// kube-controller-manager, kube-scheduler and kwok with one fake Node, so
// Deployments really roll out and pods really become Ready (without a kubelet
// or container runtime).
package controlplane
