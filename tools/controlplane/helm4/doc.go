// Package helm4 pins the Helm 4 CLI (helm.sh/helm/v4/cmd/helm, a tool of this
// module). Tests run it against the operator's releases, as a user migrating
// their CLI would. It has its own module so that Helm 4's dependencies never
// reach the product's go.mod. hack/controlplane-bins.sh --full builds it into
// the cache beside the Helm 3 CLI and links it into the assets directory as
// helm4.
package helm4
