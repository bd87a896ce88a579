package operator

import (
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/kube"
	"k8s.io/kubectl/pkg/validation"
)

// sharedValidators hands every action configuration the same client-side
// validators of rendered manifests (one per field-validation directive),
// built at most once per capabilitiesTTL.
//
// Helm validates every manifest it builds (install, upgrade, the
// owner-reference post-renderer) against the cluster's OpenAPI schema with
// Factory.Validator, and kubectl's factory builds a new validator on every
// call: each one parses the OpenAPI v3 document of the manifest's group
// version again to learn whether the server takes the fieldValidation
// parameter. That parse was three quarters of the operator's CPU during a
// burst of installs. The validators are safe for concurrent use (their
// caches are locked) and depend on no namespace; shared, they parse each
// document once. A kind whose CRD appears meanwhile is validated as
// kubectl validates a kind it has no schema for, and with its schema after
// the TTL.
type sharedValidators struct {
	now func() time.Time

	mu  sync.Mutex
	at  time.Time
	got map[string]validation.Schema
}

// factory returns f with its Validator shared.
func (s *sharedValidators) factory(f kube.Factory) kube.Factory {
	return validatingFactory{Factory: f, shared: s}
}

func (s *sharedValidators) get(directive string, build func(string) (validation.Schema, error)) (validation.Schema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.now(); s.got == nil || now.Sub(s.at) >= capabilitiesTTL {
		s.got, s.at = map[string]validation.Schema{}, now
	}
	if v, ok := s.got[directive]; ok {
		return v, nil
	}
	v, err := build(directive)
	if err != nil {
		return nil, err
	}
	// Shared by every worker: one cold parse per kind (openapicache.go).
	v = newOneColdPerKind(v)
	s.got[directive] = v
	return v, nil
}

// validatingFactory is a Helm kube factory whose Validator is shared.
type validatingFactory struct {
	kube.Factory
	shared *sharedValidators
}

func (f validatingFactory) Validator(directive string) (validation.Schema, error) {
	return f.shared.get(directive, f.Factory.Validator)
}
