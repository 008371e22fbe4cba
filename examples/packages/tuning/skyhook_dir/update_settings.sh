#!/bin/bash
# config: persist every configMap key as its drop-in, apply what can be applied now, and remove
# the drop-ins of keys that are no longer in the configMap.
set -euo pipefail
. "$(dirname "$0")/tuning_lib.sh"

if [ -f "$CONFIGMAPS/sysctl.conf" ]; then
  install_rendered "$SYSCTL_DROPIN" render_sysctl
  # Applied now; a restart_all_services interrupt or a reboot applies it again.
  sysctl -p "$SYSCTL_DROPIN"
else
  remove_file "$SYSCTL_DROPIN"
fi

if [ -f "$CONFIGMAPS/ulimit.conf" ]; then
  install_rendered "$LIMITS_DROPIN" render_limits
  # Check that the kernel accepts each value (in a subshell: the limits of this script's shell
  # do not matter); new sessions get them through pam_limits.
  while IFS=' ' read -r who kind name value; do
    if [ "$who" != "*" ] || [ "$kind" != "hard" ]; then
      continue
    fi
    case "$name" in
      memlock) flag=-l ;; nofile) flag=-n ;; fsize) flag=-f ;; stack) flag=-s ;; nproc) flag=-u ;;
    esac
    if ! (ulimit -H "$flag" "$value" && ulimit -S "$flag" "$value") 2> /dev/null; then
      echo "tuning: warning: this host does not accept ${name}=${value} now (ulimit ${flag}); it applies to new sessions" >&2
    fi
  done < "$LIMITS_DROPIN"
  enable_pam_limits
else
  remove_file "$LIMITS_DROPIN"
  release_pam_limits
fi

units_changed=false
for unit in $(configured_units); do
  install_rendered "$(service_dropin "$unit")" render_service "$unit"
  units_changed=true
done
for unit in $(installed_units); do
  if [ ! -f "$CONFIGMAPS/service_${unit}.conf" ]; then
    remove_service_dropin "$unit"
    units_changed=true
  fi
done
if [ "$units_changed" = true ]; then
  # The new limits reach a service when it restarts: use a service_restart interrupt.
  systemctl daemon-reload
fi

if [ -f "$CONFIGMAPS/grub.conf" ]; then
  install_rendered "$GRUB_DROPIN" render_grub
  # Kernel arguments take effect at the next boot: use a reboot interrupt.
  regenerate_grub_config
elif [ -e "$GRUB_DROPIN" ]; then
  remove_file "$GRUB_DROPIN"
  regenerate_grub_config
fi
