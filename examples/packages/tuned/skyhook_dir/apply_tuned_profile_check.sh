#!/bin/bash
# config-check: the wanted profiles are active and verify. With INTERRUPT=true a failing verify
# is tolerated: those settings take effect only after the package's interrupt.
set -uo pipefail
. "$(dirname "$0")/tuned_lib.sh"

have tuned-adm || fail "tuned-adm is missing"
wanted=$(wanted_profiles)
active=$(active_profiles)
[ -n "$active" ] || fail "tuned reports no active profile; is the tuned daemon running? (see 'tuned-adm active')"
[ "$active" = "$wanted" ] || fail "active profile(s) '${active}' differ from ${PROFILE_KEY} '${wanted}'"
if tuned-adm verify; then
  echo "tuned: profile(s) ${wanted} active and verified"
elif [ "${INTERRUPT:-false}" = true ]; then
  echo "tuned: 'tuned-adm verify' fails before the interrupt (INTERRUPT=true); post-interrupt-check verifies again"
else
  fail "'tuned-adm verify' failed; see /var/log/tuned/tuned.log (set INTERRUPT=true when the profile needs a reboot)"
fi
