#!/usr/bin/env bash
# The demo: start a devcluster, install skyhook, apply the Quick Start example and follow the
# rollout with `kubectl skyhook status` until it is complete.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
cat >&2 <<'MSG'
The demo is not wired up yet. When it is, this command will:
  1. build and start a devcluster (a real kube-apiserver with simulated nodes),
  2. install the skyhook CRDs, controller and webhook into it,
  3. label the nodes and apply examples/demo.yaml (the seed Quick Start),
  4. show `kubectl skyhook status demo` until the rollout is complete.
MSG
exit 1
