package watches

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/helmapp/helm-app-operator/internal/rollout"
)

// rolloutEntry is the rollout field of an entry: {maxUnavailable: <int or
// percent>, maxFailures: <int>}.
type rolloutEntry struct {
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	MaxFailures    *int                `json:"maxFailures,omitempty"`
}

// checkRollout validates the rollout field of the entry name.
func checkRollout(name string, r *rolloutEntry) error {
	if r == nil {
		return nil
	}
	if r.MaxUnavailable != nil {
		if _, err := rollout.ParseMaxUnavailable(*r.MaxUnavailable); err != nil {
			return fmt.Errorf("%s: field rollout.maxUnavailable %w", name, err)
		}
	}
	if r.MaxFailures != nil && *r.MaxFailures < 0 {
		return fmt.Errorf("%s: field rollout.maxFailures must not be negative (0 means no bound), got %d", name, *r.MaxFailures)
	}
	return nil
}

// rolloutOf is the budget of a checked rollout field, the defaults for
// what it leaves unset.
func rolloutOf(r *rolloutEntry) rollout.Budget {
	b := rollout.DefaultBudget()
	if r == nil {
		return b
	}
	if r.MaxUnavailable != nil {
		b.MaxUnavailable, _ = rollout.ParseMaxUnavailable(*r.MaxUnavailable)
	}
	if r.MaxFailures != nil {
		b.MaxFailures = *r.MaxFailures
	}
	return b
}
