package release

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// DigestKeySize is the length in bytes of a DigestKey the operator makes.
const DigestKeySize = 32

// DigestKey keys the digest of a release's values that the status
// publishes (deployedRelease.valuesDigest). An unkeyed hash of values lets
// anyone who may read the status and knows the other values test guesses of
// a secret one offline; under a key kept in a Secret of the operator's own
// namespace (internal/operator, digestkey.go) the digest tells only whether
// the values changed. Two operators (two clusters, two operator namespaces)
// have different keys, so equal values show different digests.
type DigestKey []byte

// NewDigestKey returns a random key of DigestKeySize bytes.
func NewDigestKey() (DigestKey, error) {
	k := make([]byte, DigestKeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("making a values digest key: %w", err)
	}
	return k, nil
}

// Values returns "hmac-sha256:<hex>", the HMAC-SHA256 under k of vals'
// canonical JSON (map keys sorted; no values counting as empty ones).
//
// The digest is published only: the decisions (Decide, JudgeForeign,
// ChartChangeOnly) compare the values themselves through ValuesDigest, so a
// new key or a new digest scheme (an operator upgrade from the unkeyed
// "sha256:" digest) rewrites the status once and upgrades no release.
func (k DigestKey) Values(vals map[string]any) string {
	if vals == nil {
		vals = map[string]any{}
	}
	b, err := json.Marshal(vals)
	if err != nil {
		// Values decoded from JSON always encode; keep the digest total anyway.
		b = []byte(fmt.Sprintf("%#v", vals))
	}
	m := hmac.New(sha256.New, k)
	m.Write(b)
	return "hmac-sha256:" + hex.EncodeToString(m.Sum(nil))
}
