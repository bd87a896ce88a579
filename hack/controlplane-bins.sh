#!/usr/bin/env bash
# Builds the local control plane binaries from the Go modules pinned under
# tools/controlplane/ and caches them outside the checkout, keyed by version.
#
# Usage: hack/controlplane-bins.sh [--full]
#
# Without --full: kube-apiserver, etcd and kubectl (what envtest needs).
# With --full: also kube-controller-manager, kube-scheduler, kwok, the helm
# CLI (tests make and read releases with it as a user would) and the Helm 4 CLI,
# linked as helm4 (tests read the operator's releases with it, as a user
# migrating their CLI would).
#
# Only missing binaries are built; when everything is cached this is a no-op.
# The last line of stdout is an assets directory holding symlinks to the
# binaries (usable as KUBEBUILDER_ASSETS). Progress goes to stderr.
#
# Cache root: $HELM_APP_OPERATOR_CACHE, else $XDG_CACHE_HOME/helm-app-operator,
# else ~/.cache/helm-app-operator. Layout:
#   <root>/k8s/<version>/{kube-apiserver,kube-controller-manager,kube-scheduler,kubectl}
#   <root>/etcd/<version>/etcd
#   <root>/kwok/<version>/kwok
#   <root>/helm/<version>/helm
#   <root>/helm4/<version>/helm            (linked as helm4 in the assets dir)
#   <root>/assets/<core|full>-k8s-<v>-etcd-<v>[-kwok-<v>-helm-<v>-helm4-<v>]/  (symlinks)
set -euo pipefail

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
}

full=false
while (($#)); do
  case "$1" in
    --full) full=true ;;
    -h | --help) usage; exit 0 ;;
    *) echo "controlplane-bins: unknown argument: $1" >&2; usage; exit 2 ;;
  esac
  shift
done

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
tools="${repo_root}/tools/controlplane"
cache_root="${HELM_APP_OPERATOR_CACHE:-${XDG_CACHE_HOME:-${HOME}/.cache}/helm-app-operator}"

log() { echo "controlplane-bins: $*" >&2; }

# module_version <go.mod> <module path>: the version the go.mod requires, so the
# go.mod files stay the single source of truth for what gets built.
module_version() {
  local v
  v="$(awk -v m="$2" '$1 == "require" && $2 == m { print $3; exit }
                      $1 == m && $2 ~ /^v/ { print $2; exit }' "$1")"
  if [[ -z "${v}" ]]; then
    log "cannot find ${2} in ${1}"
    exit 1
  fi
  echo "${v}"
}

k8s_version="$(module_version "${tools}/k8s/go.mod" k8s.io/kubernetes)"
etcd_version="$(module_version "${tools}/etcd/go.mod" go.etcd.io/etcd/server/v3)"
kwok_version="$(module_version "${tools}/kwok/go.mod" sigs.k8s.io/kwok)"
helm_version="$(module_version "${tools}/helm/go.mod" helm.sh/helm/v3)"
helm4_version="$(module_version "${tools}/helm4/go.mod" helm.sh/helm/v4)"

k8s_dir="${cache_root}/k8s/${k8s_version}"
etcd_dir="${cache_root}/etcd/${etcd_version}"
kwok_dir="${cache_root}/kwok/${kwok_version}"
helm_dir="${cache_root}/helm/${helm_version}"
helm4_dir="${cache_root}/helm4/${helm4_version}"

k8s_bins=(kube-apiserver kubectl)
if [[ "${full}" == true ]]; then
  k8s_bins+=(kube-controller-manager kube-scheduler)
  # Keyed by every version it links, so checkouts pinning other versions
  # never share (and relink) one directory.
  assets="${cache_root}/assets/full-k8s-${k8s_version}-etcd-${etcd_version}-kwok-${kwok_version}-helm-${helm_version}-helm4-${helm4_version}"
else
  assets="${cache_root}/assets/core-k8s-${k8s_version}-etcd-${etcd_version}"
fi

# wanted lists every binary of this invocation as its cached path; a path may
# end in =<name> to be linked into the assets dir under that name instead of
# its basename (both Helm CLIs are built as "helm").
wanted=()
for b in "${k8s_bins[@]}"; do wanted+=("${k8s_dir}/${b}"); done
wanted+=("${etcd_dir}/etcd")
if [[ "${full}" == true ]]; then
  wanted+=("${kwok_dir}/kwok" "${helm_dir}/helm" "${helm4_dir}/helm=helm4")
fi

# bin_path <wanted entry>: the cached binary; link_name: its name in assets.
bin_path() { echo "${1%%=*}"; }
link_name() {
  if [[ "$1" == *=* ]]; then echo "${1#*=}"; else basename "$1"; fi
}

all_present() {
  local p
  for p in "${wanted[@]}"; do
    [[ -x "$(bin_path "${p}")" && -x "${assets}/$(link_name "${p}")" ]] || return 1
  done
}

# Fast path: everything built and linked; no lock, no go invocation.
if all_present; then
  echo "${assets}"
  exit 0
fi

mkdir -p "${cache_root}" "${k8s_dir}" "${etcd_dir}" "${assets}"
if [[ "${full}" == true ]]; then mkdir -p "${kwok_dir}" "${helm_dir}" "${helm4_dir}"; fi

# One builder at a time; a concurrent caller waits here, then finds the
# binaries the first one built.
exec 9>"${cache_root}/.build.lock"
if ! flock -n 9; then
  log "another build is running; waiting for ${cache_root}/.build.lock"
  flock 9
fi

tmp_dirs=()
cleanup() {
  local d
  for d in "${tmp_dirs[@]+"${tmp_dirs[@]}"}"; do rm -rf "${d}"; done
}
trap cleanup EXIT
# Run the cleanup on Ctrl-C or termination as well (exit runs the EXIT trap).
trap 'exit 130' INT
trap 'exit 143' TERM

export CGO_ENABLED=0 GOWORK=off GOFLAGS="${GOFLAGS:-} -buildvcs=false"

# build <module dir> <dest dir> <ldflags> <name=package>...: builds the missing
# binaries of one module in a single go invocation (shared compile work) into a
# temp dir next to the destination, then moves each into place, so an
# interrupted build never leaves a partial binary under its final name.
build() {
  local mod="$1" dest="$2" ldflags="$3"
  shift 3
  local names=() pkgs=() spec
  for spec in "$@"; do
    if [[ ! -x "${dest}/${spec%%=*}" ]]; then
      names+=("${spec%%=*}")
      pkgs+=("${spec#*=}")
    fi
  done
  ((${#names[@]})) || return 0

  local version
  version="$(basename "${dest}")"
  log "building ${names[*]} ${version} (first time, takes minutes)..."
  local tmp start
  tmp="$(mktemp -d "${dest}/.build.XXXXXX")"
  tmp_dirs+=("${tmp}")
  start=${SECONDS}
  (cd "${mod}" && go build -trimpath -ldflags "-s -w ${ldflags}" -o "${tmp}/" "${pkgs[@]}")
  local n
  for n in "${names[@]}"; do
    # go build -o dir/ names each binary after its package directory.
    mv -f "${tmp}/${n}" "${dest}/${n}"
  done
  log "built ${names[*]} ${version} in $((SECONDS - start))s"
}

k8s_minor="${k8s_version#v}"
k8s_major="${k8s_minor%%.*}"
k8s_minor="${k8s_minor#*.}"
k8s_minor="${k8s_minor%%.*}"
k8s_ldflags=""
# Stamped as Kubernetes' own release build does; unstamped binaries report
# v0.0.0-master, which breaks Helm's kubeVersion checks against the server.
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X ${p}.gitVersion=${k8s_version}"
  k8s_ldflags+=" -X ${p}.gitMajor=${k8s_major} -X ${p}.gitMinor=${k8s_minor}"
  k8s_ldflags+=" -X ${p}.gitTreeState=clean"
done

k8s_specs=()
for b in "${k8s_bins[@]}"; do k8s_specs+=("${b}=./cmd/${b}"); done
build "${tools}/k8s" "${k8s_dir}" "${k8s_ldflags}" "${k8s_specs[@]}"
# etcd and kwok report their versions from constants in their modules.
build "${tools}/etcd" "${etcd_dir}" "" "etcd=."
if [[ "${full}" == true ]]; then
  build "${tools}/kwok" "${kwok_dir}" "" "kwok=."
  # The helm CLI reports its version from a constant of its module.
  build "${tools}/helm" "${helm_dir}" "" "helm=helm.sh/helm/v3/cmd/helm"
  # Helm 4 from its own module, so its dependencies stay out of every other.
  build "${tools}/helm4" "${helm4_dir}" "" "helm=helm.sh/helm/v4/cmd/helm"
fi

for p in "${wanted[@]}"; do
  link="${assets}/$(link_name "${p}")"
  target="$(bin_path "${p}")"
  if [[ "$(readlink "${link}" 2>/dev/null || true)" != "${target}" ]]; then
    ln -sfn "${target}" "${link}"
  fi
done

echo "${assets}"
