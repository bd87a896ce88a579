package release

import (
	helmclient "github.com/operator-framework/helm-operator-plugins/pkg/client"
	"helm.sh/helm/v3/pkg/chart"
)

// The Helm SDK's types that the packages above this one pass through without
// importing Helm: the Helm SDK is imported only here and in internal/operator
// (TestHelmImportBoundary at the repository root checks it; docs/helm4.md says
// why), so that moving to the Helm 4 SDK changes these aliases, not their users.

// Chart is a loaded Helm chart (Chart API v2), as watches.yaml's loader
// returns it.
type Chart = chart.Chart

// ClientGetter gives the Helm action client of a resource.
type ClientGetter = helmclient.ActionClientGetter
