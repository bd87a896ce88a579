// Package bench is `make bench`: it runs our operator and the baseline
// (helm-operator-plugins v0.9.1's reconciler, hack/bench/baseline) in turn,
// each as its own binary on a fresh local control plane with an audit log,
// drives the same load at both, and measures what the issue asks: time to all
// Deployed/Ready, the API requests and writes of each operator's user from the
// audit log, status writes per install, RSS, spec-change latency and the cost
// of a no-op reconcile, next to a floor of the same writes issued by a plain
// client. The figures are printed as a table and written as JSON.
//
// Nothing here is a test assertion: benchmarks are measured, never asserted.
package bench
