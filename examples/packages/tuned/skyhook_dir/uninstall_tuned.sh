#!/bin/bash
# uninstall: stop and disable tuned, remove what this package wrote, remove the tuned package.
set -uo pipefail
. "$(dirname "$0")/tuned_lib.sh"

if systemctl is-active --quiet tuned; then
  systemctl stop tuned || fail "could not stop the tuned service"
fi
systemctl disable tuned 2> /dev/null || true
if [ -f "$MANAGED_LIST" ]; then
  while IFS= read -r path; do
    rm -f "$path"
    rmdir "$(dirname "$path")" 2> /dev/null || true
  done < "$MANAGED_LIST"
  rm -f "$MANAGED_LIST"
fi
if have tuned || have tuned-adm; then
  package_manager remove
fi
echo "tuned: uninstalled"
