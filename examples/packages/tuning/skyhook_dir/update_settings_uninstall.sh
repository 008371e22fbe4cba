#!/bin/bash
# uninstall: remove every drop-in this package wrote, and the pam_limits line config added once
# no tuning package needs it.
set -euo pipefail
. "$(dirname "$0")/tuning_lib.sh"

remove_file "$SYSCTL_DROPIN"
remove_file "$LIMITS_DROPIN"
release_pam_limits

units_changed=false
for unit in $(installed_units); do
  remove_service_dropin "$unit"
  units_changed=true
done
if [ "$units_changed" = true ]; then
  systemctl daemon-reload
fi

if [ -e "$GRUB_DROPIN" ]; then
  remove_file "$GRUB_DROPIN"
  regenerate_grub_config
fi
# Settings already applied stay in effect until the services restart or the node reboots.
