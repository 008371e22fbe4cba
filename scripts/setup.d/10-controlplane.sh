#!/usr/bin/env bash
# Builds the devcluster control plane (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler in one binary) from the pinned Go module in devcluster/controlplane/.
#
# The binary is cached at $SKYHOOK_CACHE/controlplane/<hash>/devcluster-controlplane, where <hash>
# covers go.mod, go.sum and *.go; the Rust side (devcluster/src/controlplane/binary.rs) computes
# the same hash to find it. A cached build makes this script return at once. The first build
# compiles ~2,500 packages and takes 10-30 minutes on two cores, so it reports progress.
# `--print-hash` prints the cache key and exits.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/common.sh

src=devcluster/controlplane
binary_name=devcluster-controlplane

# The hash input: for each file, in a fixed order, its name, a NUL byte, then its content.
source_files() {
  printf '%s\n' go.mod go.sum
  LC_ALL=C ls -1 -- *.go
}
hash=$(
  cd "$src"
  source_files | while IFS= read -r file; do
    printf '%s\0' "$file"
    cat -- "$file"
  done | sha256sum | cut -c1-16
)

# The Rust side's test compares its hash with this one.
if [ "${1:-}" = "--print-hash" ]; then
  echo "$hash"
  exit 0
fi

cache_dir="$SKYHOOK_CACHE/controlplane/$hash"
binary="$cache_dir/$binary_name"
exit_if_built "control plane" "$binary"
require_go "the devcluster control plane" "the version in $src/go.mod"

# Report the upstream release the binary was built from, as the official builds do, so
# `kubectl version` and the /version endpoint say v1.X.Y rather than v0.0.0-master.
k8s_version=$(cd "$src" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean"
done

export GOFLAGS="-mod=mod -buildvcs=false"
build_flags=(-trimpath "-ldflags=$ldflags")

mkdir -p "$cache_dir"
tmp_binary=$(mktemp "$cache_dir/.$binary_name.XXXXXX")
build_log=$(mktemp "${TMPDIR:-/tmp}/devcluster-controlplane-build.XXXXXX")
trap 'rm -f "$tmp_binary" "$build_log"' EXIT

echo "building the control plane (kubernetes $k8s_version) into $binary" >&2
echo "downloading modules (cached in $(go env GOMODCACHE))..." >&2
(cd "$src" && go mod download) >&2

total=$(cd "$src" && go list "${build_flags[@]}" -deps -f '{{if .Stale}}{{.ImportPath}}{{end}}' . | grep -c . || true)
echo "building control plane: $total packages to compile" >&2

started=$(date +%s)
(cd "$src" && go build -v "${build_flags[@]}" -o "$tmp_binary" .) >"$build_log" 2>&1 &
build_pid=$!

# `go build -v` prints one line per package it compiles; count them against the total.
report_progress() { # <now>
  local done_count elapsed left eta_s
  done_count=$(grep -c -v -e '^#' -e ': ' "$build_log" || true)
  elapsed=$(($1 - started))
  if [ "$done_count" -gt 0 ] && [ "$total" -gt 0 ]; then
    left=$((total - done_count)); [ "$left" -lt 0 ] && left=0
    eta_s=$((elapsed * left / done_count))
    printf 'building control plane: %d/%d packages (%d%%), %s elapsed, ~%d min left\n' \
      "$done_count" "$total" $((done_count * 100 / total)) "$((elapsed / 60))m$((elapsed % 60))s" \
      $(((eta_s + 59) / 60)) >&2
  else
    printf 'building control plane: starting (%ss elapsed)\n' "$elapsed" >&2
  fi
}
watch_build "$build_pid" "$started" report_progress
if ! wait "$build_pid"; then
  echo "error: building the control plane failed; the compiler said:" >&2
  grep -e '^#' -e ': ' "$build_log" | tail -40 >&2
  exit 1
fi

chmod 0755 "$tmp_binary"
mv -f "$tmp_binary" "$binary"
elapsed=$(($(date +%s) - started))
echo "control plane built in $((elapsed / 60))m$((elapsed % 60))s: $binary" >&2

# Each build is ~120 MB; keep this one and the previous one (another checkout may still use it).
ls -1dt -- "$SKYHOOK_CACHE/controlplane"/*/ | tail -n +3 | while IFS= read -r stale; do
  echo "removing an old control-plane build: $stale" >&2
  rm -rf -- "$stale"
done
echo "$binary"
