package operator

import (
	"time"

	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
)

// For the external tests of this package.
const CapabilitiesTTL = capabilitiesTTL

func NewSharedCapabilities(inner helmclient.ActionConfigGetter, now func() time.Time) helmclient.ActionConfigGetter {
	return &sharedCapabilities{inner: inner, now: now}
}
