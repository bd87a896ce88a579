// A stand-in for pkg.package-operator.run/boxcutter, which the Go module proxy
// does not serve here (its host is not allowed). operator-controller links it
// for its experimental Boxcutter runtime (feature gate BoxcutterRuntime, off
// by default) and for one tracking cache it always starts. This module keeps
// those signatures: the tracking cache is controller-runtime's cache without
// drift watches; everything of the Boxcutter runtime returns an error.
module pkg.package-operator.run/boxcutter

go 1.26.3

require (
	github.com/go-logr/logr v1.4.3
	k8s.io/apimachinery v0.36.2
	k8s.io/client-go v0.36.2
	sigs.k8s.io/controller-runtime v0.24.1
)
