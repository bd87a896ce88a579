#!/usr/bin/env bash
# Builds OLM v1's catalogd and operator-controller from the Go module pinned in
# tools/olm (operator-framework/operator-controller) and caches them outside
# the checkout, keyed by that version and a digest of tools/olm (its go.mod,
# go.sum and the boxcutter stand-in), so a change there rebuilds.
#
# Usage: hack/olm-bins.sh
#
# Only the OLM e2e test (make test-e2e) and make olm-demo need them; make test
# never builds them. The last line of stdout is the directory holding both
# binaries and crds/, OLM's own CRDs (ClusterCatalog, ClusterExtension) from
# the same module. Progress goes to stderr.
#
# Cache root: $HELM_APP_OPERATOR_CACHE, else $XDG_CACHE_HOME/helm-app-operator,
# else ~/.cache/helm-app-operator. Layout: <root>/olm/<version>-<digest>/{catalogd,operator-controller,crds/}
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mod="${repo_root}/tools/olm"
cache_root="${HELM_APP_OPERATOR_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/helm-app-operator}"
log() { echo "olm-bins: $*" >&2; }

version="$(awk '$1 == "github.com/operator-framework/operator-controller" && $2 ~ /^v/ { print $2; exit }' "${mod}/go.mod")"
if [[ -z "${version}" ]]; then
  log "cannot find github.com/operator-framework/operator-controller in ${mod}/go.mod"
  exit 1
fi
digest="$(cd "${mod}" && find go.mod go.sum boxcutter -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12)"
dest="${cache_root}/olm/${version}-${digest}"

if [[ -x "${dest}/catalogd" && -x "${dest}/operator-controller" && -d "${dest}/crds" ]]; then
  echo "${dest}"
  exit 0
fi

mkdir -p "${dest}"
exec 9>"${cache_root}/olm/.build.lock"
if ! flock -n 9; then
  log "another build is running; waiting for ${cache_root}/olm/.build.lock"
  flock 9
fi
if [[ -x "${dest}/catalogd" && -x "${dest}/operator-controller" && -d "${dest}/crds" ]]; then
  echo "${dest}"
  exit 0
fi

tmp="$(mktemp -d "${dest}/.build.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Static, as operator-controller's own Makefile builds them (its tag
# containers_image_openpgp: containers/image without gpgme's cgo), plus the
# tags opm needs here for the same reason (no storage or graph drivers).
tags="containers_image_openpgp,containers_image_storage_stub,exclude_graphdriver_btrfs,exclude_graphdriver_devicemapper,osusergo,netgo"
ldflags="-s -w -X github.com/operator-framework/operator-controller/internal/shared/version.version=${version}"
log "building catalogd and operator-controller ${version} (first time, takes minutes)..."
start=${SECONDS}
(cd "${mod}" && CGO_ENABLED=0 GOWORK=off GOFLAGS="${GOFLAGS:-} -buildvcs=false" \
  go build -trimpath -tags "${tags}" -ldflags "${ldflags}" -o "${tmp}/" \
  github.com/operator-framework/operator-controller/cmd/catalogd \
  github.com/operator-framework/operator-controller/cmd/operator-controller)
moddir="$(cd "${mod}" && GOWORK=off go list -m -f '{{.Dir}}' github.com/operator-framework/operator-controller)"
mkdir -p "${tmp}/crds"
cp "${moddir}"/helm/olmv1/base/catalogd/crd/standard/*.yaml "${moddir}"/helm/olmv1/base/operator-controller/crd/standard/*.yaml "${tmp}/crds/"
chmod -R u+w "${tmp}/crds"
rm -rf "${dest}/crds"
mv -f "${tmp}/catalogd" "${tmp}/operator-controller" "${tmp}/crds" "${dest}/"
log "built catalogd and operator-controller ${version} in $((SECONDS - start))s"
echo "${dest}"
