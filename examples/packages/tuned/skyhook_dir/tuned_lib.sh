#!/bin/bash
# shellcheck disable=SC2034 # the variables are used by the scripts that source this file
# Shared by the tuned package's step scripts (sourced, never run on its own).

if [ -z "${SKYHOOK_DIR:-}" ]; then
  echo "tuned: SKYHOOK_DIR is not set; run this through skyhook-agent" >&2
  exit 2
fi

CONFIGMAPS="${SKYHOOK_DIR}/configmaps"
PROFILE_KEY="tuned_profile"
TUNED_DIR="/etc/tuned"
# How long one package-manager command may take before the step fails (seconds).
INSTALL_TIMEOUT="${TUNED_INSTALL_TIMEOUT:-300}"

# The package's name in the Skyhook resource (field 2 of SKYHOOK_RESOURCE_ID).
PKG=$(printf '%s' "${SKYHOOK_RESOURCE_ID:-}" | cut -d_ -f2)
if [ -z "$PKG" ] || [ "$PKG" = "${SKYHOOK_RESOURCE_ID:-}" ]; then
  PKG=tuned
fi
# The custom profiles and scripts this package wrote, one path per line.
MANAGED_LIST="${TUNED_DIR}/.skyhook-${PKG}-managed"

fail() {
  echo "tuned: $*" >&2
  exit 1
}

have() {
  command -v "$1" > /dev/null 2>&1
}

# Runs a command, killing it after INSTALL_TIMEOUT seconds, so a package manager waiting on an
# unreachable mirror or a held lock cannot hang the node's rollout.
run_bounded() {
  local rc
  if have timeout; then
    timeout --kill-after=10 "$INSTALL_TIMEOUT" "$@"
    rc=$?
  else
    "$@" &
    local pid=$!
    (sleep "$INSTALL_TIMEOUT" && kill -TERM "$pid" 2> /dev/null) &
    local watchdog=$!
    wait "$pid"
    rc=$?
    kill "$watchdog" 2> /dev/null
    wait "$watchdog" 2> /dev/null
    [ "$rc" -eq 143 ] && rc=124
  fi
  if [ "$rc" -eq 124 ]; then
    echo "tuned: '$*' did not finish within ${INSTALL_TIMEOUT}s (TUNED_INSTALL_TIMEOUT) and was stopped" >&2
  fi
  return "$rc"
}

# Installs or removes the tuned OS package with whichever package manager the host has.
package_manager() { # install|remove
  local action=$1 rc=0
  if have apt-get; then
    export DEBIAN_FRONTEND=noninteractive
    local opts=(-q -o Acquire::Retries=1 -o Acquire::http::Timeout=30 -o DPkg::Lock::Timeout=60)
    if [ "$action" = install ]; then
      run_bounded apt-get "${opts[@]}" update && run_bounded apt-get "${opts[@]}" install -y --no-install-recommends tuned || rc=$?
    else
      run_bounded apt-get "${opts[@]}" remove -y tuned || rc=$?
    fi
    [ "$rc" -eq 0 ] || fail "apt-get could not ${action} tuned (exit ${rc}); the node needs its package repositories, or tuned must be part of the node image"
  elif have dnf; then
    run_bounded dnf "$action" -y tuned || fail "dnf could not ${action} tuned (exit $?); the node needs its package repositories, or tuned must be part of the node image"
  elif have yum; then
    run_bounded yum "$action" -y tuned || fail "yum could not ${action} tuned (exit $?); the node needs its package repositories, or tuned must be part of the node image"
  else
    fail "this host has none of apt-get, dnf or yum, so tuned cannot be handled here (${action}); use a node image that has tuned installed"
  fi
}

# The profiles the configMap asks for, space separated.
wanted_profiles() {
  [ -f "$CONFIGMAPS/$PROFILE_KEY" ] || fail "the configMap has no ${PROFILE_KEY} key; set it to the profile name(s) to activate"
  tr -s '[:space:]' ' ' < "$CONFIGMAPS/$PROFILE_KEY" | sed 's/^ //; s/ $//'
}

# The profiles tuned reports as active, space separated.
active_profiles() {
  tuned-adm active 2> /dev/null | sed -n 's/^Current active profile: //p' | tr -s '[:space:]' ' ' | sed 's/ $//'
}
