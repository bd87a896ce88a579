// Package olmv0 pins OLM v0 (operator-framework/operator-lifecycle-manager:
// the olm and catalog binaries, the operators behind OperatorHub on OpenShift
// 4), built by hack/olmv0-bins.sh for the e2e tests of an install through OLM
// v0 (make test-e2e) and make olm-demo OLM=v0, and cached outside the checkout
// under ~/.cache/helm-app-operator/olmv0/<version>-<digest>/{olm,catalog,crds/}.
// Its own module, apart from tools/olm (OLM v1) too, so that OLM v0's
// dependency set never enters the product's or OLM v1's: nothing the manager
// links imports operator-lifecycle-manager.
package olmv0
