#!/usr/bin/env bash
# The demo: build skyhook, start a 3-node devcluster, install skyhook into it, apply the seed
# Quick Start (examples/demo.yaml) to the labelled nodes and follow the rollout until the Skyhook
# is complete. The cluster keeps running afterwards; `devcluster down` stops it.
#
# Environment: DEMO_NODES (default 3), DEMO_TIMEOUT seconds (default 600), DEMO_REFRESH seconds
# between progress refreshes (default 5).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
forget_builds_of_other_checkouts

nodes=${DEMO_NODES:-3}
timeout=${DEMO_TIMEOUT:-600}
refresh=${DEMO_REFRESH:-5}
label_key=skyhook.nvidia.com/test-node
demo_started=$(date +%s)

packages=(-p skyhook-devcluster -p controller -p agent)
have_plugin=false
if [ -f kubectl-skyhook/Cargo.toml ]; then
  packages+=(-p kubectl-skyhook)
  have_plugin=true
fi
step "building ${packages[*]//-p /} into $CARGO_TARGET_DIR (the first run compiles everything: several minutes)"
cargo build --locked "${packages[@]}"
bin="$CARGO_TARGET_DIR/debug"
devcluster="$bin/devcluster"

step "setting up the control plane (built once from source, then cached: the first run takes 10-30 minutes)"
scripts/setup.sh

if "$devcluster" status >/dev/null 2>&1; then
  step "a devcluster is already running: stopping it for a fresh demo"
  "$devcluster" down
fi

step "starting a devcluster with $nodes nodes"
"$devcluster" up --nodes "$nodes" >/dev/null
KUBECONFIG=$("$devcluster" kubeconfig)
export KUBECONFIG
export PATH="$bin:$PATH"

step "installing skyhook (CRDs, namespace, controller)"
controller_log=$("$devcluster" install)

step "labelling the nodes $label_key=demo"
mapfile -t node_names < <(kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}')
kubectl label nodes "${node_names[@]}" "$label_key=demo" --overwrite

step "applying examples/demo.yaml"
kubectl apply -f examples/demo.yaml

# Per-node rollout status from the nodes' status_demo labels ("waiting" before the first one).
node_statuses() {
  kubectl get nodes -l "$label_key=demo" \
    -o jsonpath='{range .items[*]}{.metadata.labels.skyhook\.nvidia\.com/status_demo}{"\n"}{end}' \
    | sed 's/^$/waiting/'
}

show_progress() {
  local elapsed=$1 statuses total complete counts eta=""
  statuses=$(node_statuses)
  total=$(grep -c . <<<"$statuses" || true)
  complete=$(grep -cx complete <<<"$statuses" || true)
  counts=$(sort <<<"$statuses" | uniq -c | awk '{printf "%s%s %s", sep, $1, $2; sep=", "}')
  if [ "$complete" -gt 0 ] && [ "$complete" -lt "$total" ]; then
    eta=", about $(((total - complete) * elapsed / complete)) s left"
  fi
  [ -t 1 ] && clear
  printf 'rollout of demo: %s s elapsed, nodes: %s (%s/%s complete%s)\n\n' \
    "$elapsed" "${counts:-none yet}" "$complete" "$total" "$eta"
  if $have_plugin; then
    kubectl skyhook status demo || true
  else
    kubectl get skyhooks || true
    kubectl get nodes -o jsonpath='{range .items[*]}{.metadata.name}{"\t"}{.metadata.annotations.skyhook\.nvidia\.com/nodeState_demo}{"\n"}{end}' || true
  fi
}

step "following the rollout until the Skyhook is complete (timeout ${timeout}s)"
rollout_started=$(date +%s)
while :; do
  elapsed=$(($(date +%s) - rollout_started))
  show_progress "$elapsed"
  status=$(kubectl get skyhook demo -o jsonpath='{.status.status}' 2>/dev/null || true)
  if [ "$status" = complete ]; then
    break
  fi
  if [ "$elapsed" -ge "$timeout" ]; then
    echo "the Skyhook is not complete after ${timeout}s (status: ${status:-none}); last lines of $controller_log:" >&2
    tail -n 40 "$controller_log" >&2
    exit 1
  fi
  sleep "$refresh"
done

step "the rollout is complete in ${elapsed}s (demo total $(($(date +%s) - demo_started))s)"
# The seed README's own command, verbatim.
seed_jsonpath='{range .items[?(@.metadata.labels.skyhook\.nvidia\.com/test-node=="demo")]}{.metadata.annotations.skyhook\.nvidia\.com/nodeState_demo}{"\n"}{end}'
echo "\$ kubectl get nodes -o jsonpath='$seed_jsonpath'"
kubectl get nodes -o jsonpath="$seed_jsonpath"
for node in "${node_names[@]}"; do
  echo
  echo "\$ devcluster exec $node -- cat /skyhook-hello-world"
  "$devcluster" exec "$node" -- cat /skyhook-hello-world
done

cat <<EOF

The cluster keeps running. Try:
  export KUBECONFIG=$KUBECONFIG PATH=$bin:\$PATH
  kubectl get skyhooks
  devcluster status
Controller log: $controller_log
Tear it down with: $devcluster down
EOF
