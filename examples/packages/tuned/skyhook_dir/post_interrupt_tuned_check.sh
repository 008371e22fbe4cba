#!/bin/bash
# post-interrupt-check: after the interrupt every setting of the active profile is in effect.
set -uo pipefail
. "$(dirname "$0")/tuned_lib.sh"

have tuned-adm || fail "tuned-adm is missing"
tuned-adm verify || fail "'tuned-adm verify' failed after the interrupt; see /var/log/tuned/tuned.log"
echo "tuned: profile(s) $(active_profiles) verified"
