#!/usr/bin/env bash
# Fails when a tracked file is an executable binary (ELF, Mach-O, PE) or
# larger than 1 MiB: build output belongs in bin/ (ignored), not in git.
# make test runs it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
limit=$((1024 * 1024))
bad=0
while IFS= read -r -d '' f; do
  [[ -f "${f}" && ! -L "${f}" ]] || continue
  size=$(stat -c %s "${f}")
  if ((size > limit)); then
    echo "check-tracked: ${f} is ${size} bytes, over 1 MiB: build output or data does not belong in git" >&2
    bad=1
  fi
  magic=$(head -c 4 "${f}" | od -An -tx1 | tr -d ' \n')
  case "${magic}" in
    7f454c46 | cffaedfe | cefaedfe | feedface | feedfacf | cafebabe | 4d5a*)
      echo "check-tracked: ${f} is an executable binary: build output belongs in bin/ (git rm --cached it)" >&2
      bad=1
      ;;
  esac
done < <(git ls-files -z)
exit "${bad}"
