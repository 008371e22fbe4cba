#!/bin/bash
# post-interrupt-check: after the service restart, containerd and CRI-O run with the limits of
# their drop-ins (read from /proc/<main pid>/limits).
set -uo pipefail
. "$(dirname "$0")/tuning_lib.sh"

# Limit directive -> the row of /proc/<pid>/limits.
limit_row() {
  case "$1" in
    LimitNOFILE) echo "Max open files" ;;
    LimitFSIZE) echo "Max file size" ;;
    LimitSTACK) echo "Max stack size" ;;
    LimitNPROC) echo "Max processes" ;;
    LimitMEMLOCK) echo "Max locked memory" ;;
  esac
}

# A systemd limit value (infinity, a number with an optional K/M/G/T suffix) as /proc shows it.
normalize() {
  local value=$1 number suffix
  case "$value" in infinity | unlimited) echo unlimited; return ;; esac
  number=${value%[KMGTkmgt]}
  suffix=${value#"$number"}
  case "$suffix" in
    '') echo "$number" ;;
    K | k) echo $((number * 1024)) ;;
    M | m) echo $((number * 1024 * 1024)) ;;
    G | g) echo $((number * 1024 * 1024 * 1024)) ;;
    T | t) echo $((number * 1024 * 1024 * 1024 * 1024)) ;;
  esac
}

failed=0
for unit in containerd crio; do
  [ -f "$CONFIGMAPS/service_${unit}.conf" ] || continue
  pid=$(systemctl show -p MainPID --value "${unit}.service" 2> /dev/null || true)
  if [ -z "$pid" ] || [ "$pid" = 0 ] || [ ! -r "/proc/${pid}/limits" ]; then
    echo "tuning: ${unit} is not running, so its limits cannot be checked" >&2
    failed=1
    continue
  fi
  dropin=$(render_service "$unit")
  while IFS='=' read -r directive value; do
    directive=$(printf '%s' "$directive" | tr -d '[:space:]')
    value=$(printf '%s' "$value" | tr -d '[:space:]')
    row=$(limit_row "$directive")
    [ -n "$row" ] || continue
    soft=$(normalize "${value%%:*}")
    hard=$(normalize "${value##*:}")
    actual=$(grep "^${row} " "/proc/${pid}/limits" | sed "s/^${row}[[:space:]]*//")
    actual_soft=$(printf '%s' "$actual" | awk '{print $1}')
    actual_hard=$(printf '%s' "$actual" | awk '{print $2}')
    if [ "$actual_soft" = "$soft" ] && [ "$actual_hard" = "$hard" ]; then
      echo "tuning: ${unit} ${directive}=${value} is in effect"
    else
      echo "tuning: ${unit} ${directive}=${value} is not in effect (soft ${actual_soft}, hard ${actual_hard}); restart ${unit} with a service_restart interrupt" >&2
      failed=1
    fi
  done <<< "$dropin"
done
exit "$failed"
