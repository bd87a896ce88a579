#!/usr/bin/env bash
# Builds OLM v0's olm and catalog operators from the Go module pinned in
# tools/olmv0 (operator-framework/operator-lifecycle-manager) and caches them
# outside the checkout, keyed by that version and a digest of tools/olmv0 (its
# go.mod and go.sum), so a change there rebuilds.
#
# Usage: hack/olmv0-bins.sh
#
# Only the OLM v0 e2e tests (make test-e2e) and make olm-demo OLM=v0 need
# them; make test never builds them. The last line of stdout is the directory
# holding both binaries and crds/, OLM v0's own CRDs (CatalogSource,
# Subscription, InstallPlan, ClusterServiceVersion, OperatorGroup, ...) from the
# same module. Progress goes to stderr.
#
# Cache root: $HELM_APP_OPERATOR_CACHE, else $XDG_CACHE_HOME/helm-app-operator,
# else ~/.cache/helm-app-operator. Layout: <root>/olmv0/<version>-<digest>/{olm,catalog,crds/}
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mod="${repo_root}/tools/olmv0"
module=github.com/operator-framework/operator-lifecycle-manager
cache_root="${HELM_APP_OPERATOR_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/helm-app-operator}"
log() { echo "olmv0-bins: $*" >&2; }

version="$(awk -v m="${module}" '$1 == m && $2 ~ /^v/ { print $2; exit }' "${mod}/go.mod")"
if [[ -z "${version}" ]]; then
  log "cannot find ${module} in ${mod}/go.mod"
  exit 1
fi
digest="$(cd "${mod}" && sha256sum go.mod go.sum | sha256sum | cut -c1-12)"
dest="${cache_root}/olmv0/${version}-${digest}"
built() { [[ -x "${dest}/olm" && -x "${dest}/catalog" && -d "${dest}/crds" ]]; }

if built; then
  echo "${dest}"
  exit 0
fi

mkdir -p "${dest}"
exec 9>"${cache_root}/olmv0/.build.lock"
if ! flock -n 9; then
  log "another build is running; waiting for ${cache_root}/olmv0/.build.lock"
  flock 9
fi
if built; then
  echo "${dest}"
  exit 0
fi

tmp="$(mktemp -d "${dest}/.build.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Static, with the tag OLM's own Makefile builds with (json1: the sqlite
# registry code operator-registry links).
ldflags="-s -w -X ${module}/pkg/version.OLMVersion=${version}"
log "building olm and catalog ${version} (first time, takes minutes)..."
start=${SECONDS}
(cd "${mod}" && CGO_ENABLED=0 GOWORK=off GOFLAGS="${GOFLAGS:-} -buildvcs=false" \
  go build -trimpath -tags json1 -ldflags "${ldflags}" -o "${tmp}/" \
  "${module}/cmd/olm" "${module}/cmd/catalog")
moddir="$(cd "${mod}" && GOWORK=off go list -m -f '{{.Dir}}' "${module}")"
mkdir -p "${tmp}/crds"
cp "${moddir}"/deploy/chart/crds/*.yaml "${tmp}/crds/"
chmod -R u+w "${tmp}/crds"
rm -rf "${dest}/crds"
mv -f "${tmp}/olm" "${tmp}/catalog" "${tmp}/crds" "${dest}/"
log "built olm and catalog ${version} in $((SECONDS - start))s"
echo "${dest}"
