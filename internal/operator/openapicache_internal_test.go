package operator

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kubectl/pkg/validation"
)

// coldSchema is a validator that, like kubectl's, is slow for a kind until
// it has validated one manifest of it, and counts the manifests validated at
// once while cold.
type coldSchema struct {
	mu      sync.Mutex
	warm    map[string]bool
	cold    map[string]int // manifests under validation while their kind is cold
	maxCold map[string]int
	calls   atomic.Int64
}

func (c *coldSchema) ValidateBytes(data []byte) error {
	c.calls.Add(1)
	gvk, ok := manifestKind(data)
	if !ok {
		return errors.New("not a manifest")
	}
	k := gvk.String()
	var judged error
	if k == "/v1, Kind=Secret" {
		judged = errors.New("judged by the inner validator")
	}
	c.mu.Lock()
	if c.warm[k] {
		c.mu.Unlock()
		return judged
	}
	c.cold[k]++
	c.maxCold[k] = max(c.maxCold[k], c.cold[k])
	c.mu.Unlock()
	time.Sleep(20 * time.Millisecond) // the parse of the OpenAPI document
	c.mu.Lock()
	c.cold[k]--
	c.warm[k] = true
	c.mu.Unlock()
	return judged
}

// Workers that start a burst of installs at once share one validator; the
// first manifest of each kind is validated alone, so kubectl parses the
// kind's OpenAPI document once rather than once per worker, and every
// manifest still gets the inner validator's own judgement.
func TestSharedValidatorIsColdOncePerKind(t *testing.T) {
	inner := &coldSchema{warm: map[string]bool{}, cold: map[string]int{}, maxCold: map[string]int{}}
	s := &sharedValidators{now: time.Now}
	v, err := s.get(metav1.FieldValidationStrict, func(string) (validation.Schema, error) { return inner, nil })
	if err != nil {
		t.Fatal(err)
	}
	manifests := map[string]string{
		"/v1, Kind=ConfigMap":      `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`,
		"/v1, Kind=Secret":         `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"a"}}`,
		"apps/v1, Kind=Deployment": `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a"}}`,
	}
	const workers = 8
	var wg sync.WaitGroup
	errs := make(chan error, workers*len(manifests))
	for range workers {
		for k, m := range manifests {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := v.ValidateBytes([]byte(m))
				if (err != nil) != (k == "/v1, Kind=Secret") {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a judgement other than the inner validator's: %v", err)
	}
	for k := range manifests {
		if got := inner.maxCold[k]; got != 1 {
			t.Errorf("%s: %d manifests validated at once while the kind was cold, want 1", k, got)
		}
	}
	if got := inner.calls.Load(); got != workers*int64(len(manifests)) {
		t.Errorf("the inner validator saw %d manifests, want every one of %d", got, workers*len(manifests))
	}
	// What is not a manifest goes to the inner validator as it is.
	if err := v.ValidateBytes([]byte("not json")); err == nil || err.Error() != "not a manifest" {
		t.Errorf("an unreadable manifest: %v, want the inner validator's error", err)
	}
}
