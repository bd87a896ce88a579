// Package installtest proves that the OLM bundle's permissions are enough to
// run the operator: its envtest grants exactly the CSV's permissions and
// clusterPermissions to the CSV's ServiceAccount, the way OLM does for each
// install mode, and runs the operator as that ServiceAccount through a
// release's whole life. It holds tests only.
package installtest
