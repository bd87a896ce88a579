// Package opm pins operator-registry's opm, built by internal/tooling/ship (make
// catalog-push) into the catalog image and cached outside the checkout under
// ~/.cache/helm-app-operator/opm/<version>/<os>-<arch>/opm. Its own module, so
// that opm's dependency set is operator-registry's and not the product's.
package opm
