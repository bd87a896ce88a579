// Package release is the release state machine. It observes what Helm's
// storage holds for a resource's release, decides the one next action, and runs
// it, one file per Helm action (install.go, upgrade.go, uninstall.go,
// reapply.go). Every error it returns carries the status reason it was born
// with (see Error); the reconciler maps the result onto status.
//
// Nothing here writes status or talks to the resource: data flows one way,
// from the resource's values to Helm and back as an Outcome.
package release
