#!/usr/bin/env bash
# Builds krew (the kubectl plugin manager) and its manifest validator from the Go module pinned in
# krew/tool/, so the tests can install kubectl-skyhook the way users do: `kubectl krew install`.
#
# The binaries are cached in $SKYHOOK_CACHE/krew/<hash>/ (kubectl-krew, validate-krew-manifest),
# where <hash> covers krew/tool/go.mod and go.sum; a cached build makes this script return at once.
# The first build takes about a minute. Prints the directory holding the binaries on stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/common.sh

src=krew/tool
hash=$(cat "$src/go.mod" "$src/go.sum" | sha256sum | cut -c1-16)
cache_dir="$SKYHOOK_CACHE/krew/$hash"
exit_if_built krew "$cache_dir" "$cache_dir/kubectl-krew" "$cache_dir/validate-krew-manifest"
require_go krew "the version in $src/go.mod"

krew_version=$(cd "$src" && go list -m -f '{{.Version}}' sigs.k8s.io/krew)
echo "building krew $krew_version into $cache_dir (modules cached in $(go env GOMODCACHE))" >&2
# The module proxy refuses to list krew's versions (HTTP 403), which `go install krew@version`
# needs; building the pinned module's tools reads only the exact versions in go.sum.
export GOFLAGS="-mod=readonly -buildvcs=false"
build_dir=$(mktemp -d "${TMPDIR:-/tmp}/krew-build.XXXXXX")
trap 'rm -rf "$build_dir"' EXIT
(
  cd "$src"
  # krew reports this tag in `kubectl krew version`; without it krew calls itself a dev build.
  go build -trimpath -ldflags "-s -w -X sigs.k8s.io/krew/internal/version.gitTag=$krew_version" \
    -o "$build_dir/" sigs.k8s.io/krew/cmd/krew sigs.k8s.io/krew/cmd/validate-krew-manifest
) >&2
mkdir -p "$cache_dir"
# kubectl finds plugins by name: `kubectl krew` runs kubectl-krew.
mv -f "$build_dir/krew" "$cache_dir/kubectl-krew"
mv -f "$build_dir/validate-krew-manifest" "$cache_dir/validate-krew-manifest"
echo "krew built: $cache_dir" >&2

# Keep this build and the previous one (another checkout may still use it).
ls -1dt -- "$SKYHOOK_CACHE/krew"/*/ | tail -n +3 | while IFS= read -r stale; do
  echo "removing an old krew build: $stale" >&2
  rm -rf -- "$stale"
done
echo "$cache_dir"
