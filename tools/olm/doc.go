// Package olm pins OLM v1 (operator-framework/operator-controller: the
// operator-controller and catalogd binaries), built by hack/olm-bins.sh for the
// e2e test of an install through OLM (make test-e2e) and make olm-demo, and
// cached outside the checkout under
// ~/.cache/helm-app-operator/olm/<version>/{catalogd,operator-controller}. Its
// own module, so that OLM's dependency set never enters the product's: nothing
// the manager links imports operator-controller.
package olm
