#!/bin/bash
# uninstall-check: none of this package's drop-ins remain.
set -uo pipefail
. "$(dirname "$0")/tuning_lib.sh"

remaining=""
for path in "$SYSCTL_DROPIN" "$LIMITS_DROPIN" "$GRUB_DROPIN"; do
  [ -e "$path" ] && remaining="${remaining} ${path}"
done
for unit in $(installed_units); do
  remaining="${remaining} $(service_dropin "$unit")"
done
if [ -n "$remaining" ]; then
  echo "tuning: these drop-ins of ${PKG} still exist:${remaining}" >&2
  exit 1
fi
echo "tuning: no drop-ins of ${PKG} remain"
