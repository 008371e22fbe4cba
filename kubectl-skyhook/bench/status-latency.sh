#!/usr/bin/env bash
# How long `kubectl skyhook status` takes on a large cluster: a devcluster of NODES light nodes
# (default 1000) whose node annotations say a Skyhook of 3 packages is complete on 90% of them,
# in progress on 8% and erroring on 2%. No controller runs, so nothing changes while the plugin
# is timed; the Skyhook's status is written once, as the operator would.
#
#   kubectl-skyhook/bench/status-latency.sh [NODES] [RUNS]
#
# Prints the median and slowest wall time of RUNS (default 5) runs of `status`, `status bench`,
# `status bench -o wide`, `node list --skyhook bench` and `plan bench`. Uses the binaries in
# $CARGO_TARGET_DIR/debug (`cargo build -p devcluster -p kubectl-skyhook` first) and its own
# devcluster state directory, which it stops at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/common.sh

nodes=${1:-1000}
runs=${2:-5}
bin="$CARGO_TARGET_DIR/debug"
for binary in devcluster kubectl-skyhook; do
  [ -x "$bin/$binary" ] || {
    echo "error: $bin/$binary is missing; run cargo build -p devcluster -p kubectl-skyhook" >&2
    exit 1
  }
done
export PATH="$bin:$PATH"
export DEVCLUSTER_STATE_DIR
DEVCLUSTER_STATE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/skyhook-status-bench.XXXXXX")
work=$(mktemp -d "${TMPDIR:-/tmp}/skyhook-status-bench-work.XXXXXX")
trap 'devcluster down >/dev/null 2>&1 || true; rm -rf "$DEVCLUSTER_STATE_DIR" "$work"' EXIT

step "starting a devcluster of $nodes light nodes"
KUBECONFIG=$(devcluster up --nodes "$nodes" --light)
export KUBECONFIG
kubectl apply --server-side -f chart/crds/ >/dev/null
kubectl create namespace skyhook >/dev/null

step "writing the node state of Skyhook bench (3 packages) on every node"
packages=(alpha beta gamma)
entry() { # name stage state
  printf '"%s|1.0.0":{"name":"%s","version":"1.0.0","image":"ghcr.io/nvidia/skyhook/agentless","stage":"%s","state":"%s"}' \
    "$1" "$1" "$2" "$3"
}
complete=0
for i in $(seq 1 "$nodes"); do
  if [ $((i % 50)) -eq 0 ]; then status=erroring; last=(apply erroring)
  elif [ $((i % 12)) -eq 0 ]; then status=in_progress; last=(apply in_progress)
  else status=complete; last=(config complete); complete=$((complete + 1))
  fi
  state="{$(entry alpha config complete),$(entry beta config complete),$(entry gamma "${last[@]}")}"
  state=${state//\"/\\\"}
  cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: node-$i
  labels:
    skyhook.nvidia.com/test-node: skyhooke2e
    skyhook.nvidia.com/status_bench: $status
  annotations:
    skyhook.nvidia.com/nodeState_bench: "$state"
    skyhook.nvidia.com/status_bench: $status
EOF
done >"$work/nodes.yaml"
kubectl apply --server-side --field-manager=bench -f "$work/nodes.yaml" >/dev/null

package_spec=""
for package in "${packages[@]}"; do
  package_spec+="    $package: {version: 1.0.0, image: ghcr.io/nvidia/skyhook/agentless}"$'\n'
done
kubectl apply -f - >/dev/null <<EOF
apiVersion: skyhook.nvidia.com/v1alpha1
kind: Skyhook
metadata: {name: bench}
spec:
  nodeSelectors: {matchLabels: {skyhook.nvidia.com/test-node: skyhooke2e}}
  packages:
$package_spec
EOF
kubectl patch skyhook bench --subresource=status --type=merge -p "{\"status\":{\"status\":\"in_progress\",\"completeNodes\":\"$complete/$nodes\",\"compartmentStatuses\":{\"__default__\":{\"matched\":$nodes,\"ceiling\":$nodes,\"inProgress\":$((nodes - complete)),\"completed\":$complete,\"progressPercent\":$((complete * 100 / nodes)),\"batchState\":{\"currentBatch\":2}}}}}" >/dev/null

# Milliseconds of one run of `kubectl skyhook "$@"` (output discarded).
time_once() {
  local started ended
  started=$(date +%s%N)
  kubectl skyhook "$@" >/dev/null
  ended=$(date +%s%N)
  echo $(((ended - started) / 1000000))
}

step "timing $runs runs of each command (milliseconds; first run discarded as warm-up)"
printf '%-40s %8s %8s\n' command median slowest
for command in "status" "status bench" "status bench -o wide" "node list --skyhook bench" "plan bench"; do
  read -ra args <<<"$command"
  time_once "${args[@]}" >/dev/null
  mapfile -t times < <(for _ in $(seq 1 "$runs"); do time_once "${args[@]}"; done | sort -n)
  printf '%-40s %8s %8s\n' "kubectl skyhook $command" "${times[$((runs / 2))]}" "${times[$((runs - 1))]}"
done
echo "($nodes nodes: $complete complete; every 12th in progress, every 50th erroring; 3 packages)"
