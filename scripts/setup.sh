#!/usr/bin/env bash
# Installs everything the tests and the demo need that a fresh machine lacks. Idempotent: each
# part checks before it installs, and builds are cached under $SKYHOOK_CACHE.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh

# Debian packages some tests use (overlay mounts, process tools, curl for the webhook's TLS
# check). Installed only when missing.
need_apt=()
for bin_pkg in "mount:mount" "ps:procps" "unshare:util-linux" "curl:curl"; do
  bin=${bin_pkg%%:*}; pkg=${bin_pkg##*:}
  command -v "$bin" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "installing Debian packages: ${need_apt[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi

# Every further prerequisite (the devcluster control plane, helm, krew, ...) registers itself here.
for part in scripts/setup.d/*.sh; do
  [ -e "$part" ] || continue
  step "setup: $(basename "$part" .sh)"
  bash "$part"
done
