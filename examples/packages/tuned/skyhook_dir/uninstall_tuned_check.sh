#!/bin/bash
# uninstall-check: tuned is gone and not running.
set -uo pipefail
. "$(dirname "$0")/tuned_lib.sh"

have tuned && fail "the tuned binary is still installed ($(command -v tuned))"
systemctl is-active --quiet tuned && fail "the tuned service is still active"
[ -f "$MANAGED_LIST" ] && fail "${MANAGED_LIST} still lists files of this package"
echo "tuned: not installed"
