#!/bin/bash
# apply and upgrade: install tuned (unless present) and run it.
set -uo pipefail
. "$(dirname "$0")/tuned_lib.sh"

if have tuned && have tuned-adm; then
  echo "tuned: already installed ($(command -v tuned))"
else
  echo "tuned: installing the tuned package (each package-manager command is limited to ${INSTALL_TIMEOUT}s)"
  package_manager install
  have tuned-adm || fail "the package manager finished but tuned-adm is still missing"
fi
systemctl enable tuned || fail "could not enable the tuned service"
systemctl start tuned || fail "could not start the tuned service"
echo "tuned: tuned is enabled and running"
