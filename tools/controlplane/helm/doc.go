// Package helm pins the helm CLI (helm.sh/helm/v3/cmd/helm, a tool of this
// module) that tests use to make and read releases as a user would.
// hack/controlplane-bins.sh --full builds it into the cache beside kubectl.
package helm
