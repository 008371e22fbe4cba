#!/bin/bash
# config-check: every configMap key is persisted exactly as rendered, and no drop-in remains
# for a key that was removed.
set -uo pipefail
. "$(dirname "$0")/tuning_lib.sh"

failed=0
expect() { # <configmap key> <drop-in> <render function> [args...]
  local key=$1 path=$2
  shift 2
  if [ -f "$CONFIGMAPS/$key" ]; then
    if matches_rendered "$path" "$@"; then
      echo "tuning: ${path} matches ${key}"
    else
      echo "tuning: ${path} is missing or differs from the configMap key ${key}" >&2
      failed=1
    fi
  elif [ -e "$path" ]; then
    echo "tuning: ${path} remains although the configMap has no ${key}" >&2
    failed=1
  fi
}

expect sysctl.conf "$SYSCTL_DROPIN" render_sysctl
expect ulimit.conf "$LIMITS_DROPIN" render_limits
expect grub.conf "$GRUB_DROPIN" render_grub
for unit in $({ configured_units; installed_units; } | sort -u); do
  expect "service_${unit}.conf" "$(service_dropin "$unit")" render_service "$unit"
done
exit "$failed"
