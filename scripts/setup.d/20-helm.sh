#!/usr/bin/env bash
# Builds a pinned helm v3 from its Go module (no binary downloads are possible here) for the chart
# tests (e2e/tests/e2e/chart_*.rs): `helm lint`, `helm template`, and server-side dry-runs of the render.
#
# The binary is cached at $SKYHOOK_CACHE/helm/<version>/helm; the tests look it up at the same
# path (e2e/src/helm.rs holds the same version; a test checks they agree). A cached
# build makes this script return at once. The first build compiles a few hundred packages (about
# 6 minutes on two cores), so it reports progress. Prints the binary's path on stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/common.sh

version=v3.21.4
cache_dir="$SKYHOOK_CACHE/helm/$version"
binary="$cache_dir/helm"
exit_if_built "helm $version" "$binary"
require_go helm 1.24

mkdir -p "$cache_dir"
gobin=$(mktemp -d "$cache_dir/.gobin.XXXXXX")
build_log=$(mktemp "${TMPDIR:-/tmp}/helm-build.XXXXXX")
trap 'rm -rf "$gobin" "$build_log"' EXIT

# helm's release builds stamp the version in through ldflags; without it `helm version` says
# v3.x-dev, and charts with a kubeVersion constraint would be checked against that.
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version"
export GOFLAGS="-buildvcs=false"
export CGO_ENABLED=0

echo "building helm $version into $binary (modules cached in $(go env GOMODCACHE))" >&2
started=$(date +%s)
GOBIN="$gobin" go install -v -trimpath "-ldflags=$ldflags" "helm.sh/helm/v3/cmd/helm@$version" \
  >"$build_log" 2>&1 &
build_pid=$!

# `go install -v` prints one line per package it compiles.
report_progress() { # <now>
  local compiled
  compiled=$(grep -c -v -e '^#' -e ': ' -e '^go: ' "$build_log" || true)
  printf 'building helm: %d packages compiled, %s elapsed\n' "$compiled" \
    "$((($1 - started) / 60))m$((($1 - started) % 60))s" >&2
}
watch_build "$build_pid" "$started" report_progress
if ! wait "$build_pid"; then
  echo "error: building helm $version failed; go said:" >&2
  tail -40 "$build_log" >&2
  exit 1
fi

mv -f "$gobin/helm" "$binary"
elapsed=$(($(date +%s) - started))
echo "helm $version built in $((elapsed / 60))m$((elapsed % 60))s: $binary" >&2
"$binary" version --short >&2
echo "$binary"
