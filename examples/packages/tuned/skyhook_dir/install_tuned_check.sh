#!/bin/bash
# apply-check and upgrade-check: tuned is installed, enabled and active.
set -uo pipefail
. "$(dirname "$0")/tuned_lib.sh"

have tuned || fail "the tuned binary is missing"
have tuned-adm || fail "the tuned-adm binary is missing"
systemctl is-enabled --quiet tuned || fail "the tuned service is not enabled"
systemctl is-active --quiet tuned || fail "the tuned service is not active"
echo "tuned: installed, enabled and active"
