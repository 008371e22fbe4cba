#!/bin/bash
# uninstall-check: none of this package's drop-ins remain, nor a pam_limits line it added that
# no tuning package needs.
set -uo pipefail
. "$(dirname "$0")/tuning_lib.sh"

remaining=""
for path in "$SYSCTL_DROPIN" "$LIMITS_DROPIN" "$GRUB_DROPIN"; do
  [ -e "$path" ] && remaining="${remaining} ${path}"
done
for unit in $(installed_units); do
  remaining="${remaining} $(service_dropin "$unit")"
done
for session in $(unneeded_pam_lines); do
  remaining="${remaining} ${session} (pam_limits line)"
done
if [ -n "$remaining" ]; then
  echo "tuning: these files of ${PKG} still exist:${remaining}; run the uninstall step again" >&2
  exit 1
fi
echo "tuning: no drop-ins of ${PKG} remain"
