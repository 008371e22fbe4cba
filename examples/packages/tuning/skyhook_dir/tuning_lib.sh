#!/bin/bash
# shellcheck disable=SC2034 # the variables are used by the scripts that source this file
# Shared by the tuning package's step scripts (sourced, never run on its own): where each
# configMap key is persisted and how its drop-in is rendered. Rendering is a pure function of
# the configMap, so the config step writes and the check step compares the same bytes.

# The package's name in the Skyhook resource (field 2 of SKYHOOK_RESOURCE_ID,
# "<skyhook>-<uid>-<generation>_<package>_<version>"); it keeps the drop-ins of two tuning
# packages on one node apart.
tuning_package_name() {
  local name
  name=$(printf '%s' "${SKYHOOK_RESOURCE_ID:-}" | cut -d_ -f2)
  if [ -z "$name" ] || [ "$name" = "${SKYHOOK_RESOURCE_ID:-}" ]; then
    name=tuning
  fi
  printf '%s' "$name"
}

if [ -z "${SKYHOOK_DIR:-}" ]; then
  echo "tuning: SKYHOOK_DIR is not set; run this through skyhook-agent" >&2
  exit 2
fi

PKG=$(tuning_package_name)
CONFIGMAPS="${SKYHOOK_DIR}/configmaps"
SYSCTL_DROPIN="/etc/sysctl.d/999-${PKG}-tuning.conf"
LIMITS_DROPIN="/etc/security/limits.d/999-${PKG}-tuning.conf"
GRUB_DROPIN="/etc/default/grub.d/999-${PKG}-tuning.cfg"
SYSTEMD_DIR="/etc/systemd/system"
SERVICE_DROPIN_NAME="999-${PKG}-tuning.conf"
ULIMIT_NAMES="memlock nofile fsize stack nproc"
PAM_SESSIONS="/etc/pam.d/common-session /etc/pam.d/common-session-noninteractive"
# Ends the pam_limits line this package adds, so uninstall removes only its own line.
PAM_MARK="# added by the skyhook tuning package"

service_dropin() { # <unit>
  printf '%s/%s.service.d/%s' "$SYSTEMD_DIR" "$1" "$SERVICE_DROPIN_NAME"
}

# The units that have a service_<unit>.conf key in the configMap.
configured_units() {
  local key unit
  for key in "$CONFIGMAPS"/service_*.conf; do
    [ -f "$key" ] || continue
    unit=$(basename "$key")
    unit=${unit#service_}
    printf '%s\n' "${unit%.conf}"
  done
}

# The units that carry one of this package's drop-ins on the host.
installed_units() {
  local dropin unit
  for dropin in "$SYSTEMD_DIR"/*.service.d/"$SERVICE_DROPIN_NAME"; do
    [ -f "$dropin" ] || continue
    unit=$(basename "$(dirname "$dropin")")
    printf '%s\n' "${unit%.service.d}"
  done
}

render_sysctl() {
  cat "$CONFIGMAPS/sysctl.conf"
}

# ulimit.conf holds name=value lines (memlock, nofile, fsize, stack, nproc; a number or
# "unlimited"). pam_limits' "*" does not cover root, so root gets its own lines.
render_limits() {
  local line name value
  while IFS= read -r line || [ -n "$line" ]; do
    line=$(printf '%s' "$line" | tr -d '[:space:]')
    case "$line" in '' | '#'*) continue ;; esac
    name=${line%%=*}
    value=${line#*=}
    if [ "$name" = "$line" ] || ! printf ' %s ' "$ULIMIT_NAMES" | grep -q " ${name} "; then
      echo "tuning: ulimit.conf line '${line}' is not <name>=<value> with a name among: ${ULIMIT_NAMES}" >&2
      return 1
    fi
    if ! printf '%s' "$value" | grep -Eq '^([0-9]+|unlimited)$'; then
      echo "tuning: ulimit.conf value for ${name} must be a whole number or 'unlimited', got '${value}'" >&2
      return 1
    fi
    printf '* soft %s %s\n* hard %s %s\nroot soft %s %s\nroot hard %s %s\n' \
      "$name" "$value" "$name" "$value" "$name" "$value" "$name" "$value"
  done < "$CONFIGMAPS/ulimit.conf"
}

# A service_<unit>.conf key is a systemd drop-in; bare Limit...= lines get a [Service] header.
render_service() { # <unit>
  local key="$CONFIGMAPS/service_$1.conf"
  if ! grep -q '^[[:space:]]*\[' "$key"; then
    echo '[Service]'
  fi
  cat "$key"
}

# grub.conf holds one kernel argument per line.
render_grub() {
  local args
  args=$(grep -v '^[[:space:]]*\(#\|$\)' "$CONFIGMAPS/grub.conf" | tr '\n' ' ' | sed 's/[[:space:]]*$//')
  # shellcheck disable=SC2016 # grub expands $GRUB_CMDLINE_LINUX_DEFAULT when it reads the file
  printf 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT %s"\n' "$args"
}

# Writes the output of a render function to a file, creating its directory.
install_rendered() { # <path> <render function> [args...]
  local path=$1
  shift
  local tmp
  mkdir -p "$(dirname "$path")"
  tmp=$(mktemp "${path}.XXXXXX")
  if ! "$@" > "$tmp"; then
    rm -f "$tmp"
    return 1
  fi
  chmod 0644 "$tmp"
  mv "$tmp" "$path"
  echo "tuning: wrote ${path}"
}

# Succeeds when the file holds exactly what the render function produces. (No process
# substitution: it needs /dev/fd, which a minimal host root may lack.)
matches_rendered() { # <path> <render function> [args...]
  local path=$1
  shift
  [ -f "$path" ] || return 1
  local expected rc
  expected=$(mktemp)
  "$@" > "$expected" && cmp -s "$path" "$expected"
  rc=$?
  rm -f "$expected"
  return "$rc"
}

remove_file() { # <path>
  if [ -e "$1" ]; then
    rm -f "$1"
    echo "tuning: removed $1"
  fi
}

# Removes a unit's drop-in and, when nothing else is left in it, its <unit>.service.d directory.
remove_service_dropin() { # <unit>
  remove_file "$(service_dropin "$1")"
  rmdir "$(dirname "$(service_dropin "$1")")" 2> /dev/null || true
}

regenerate_grub_config() {
  if command -v update-grub > /dev/null 2>&1; then
    update-grub
  elif command -v grub2-mkconfig > /dev/null 2>&1; then
    grub2-mkconfig -o /boot/grub2/grub.cfg
  else
    echo "tuning: neither update-grub nor grub2-mkconfig is installed; cannot regenerate the boot loader config for ${GRUB_DROPIN}" >&2
    return 1
  fi
}

# Enables pam_limits in the Debian session stacks that lack it, marking the line as ours.
enable_pam_limits() {
  local session
  for session in $PAM_SESSIONS; do
    [ -f "$session" ] || continue
    if ! grep -Eq '^[[:space:]]*session[[:space:]].*pam_limits\.so' "$session"; then
      echo "session required pam_limits.so ${PAM_MARK}" >> "$session"
      echo "tuning: enabled pam_limits in ${session}"
    fi
  done
}

# The session files holding a pam_limits line that a tuning package added and that no tuning
# package needs any more: no tuning limits drop-in (of any package name) remains.
unneeded_pam_lines() {
  local dropin session
  for dropin in /etc/security/limits.d/999-*-tuning.conf; do
    [ -e "$dropin" ] && return 0
  done
  for session in $PAM_SESSIONS; do
    [ -f "$session" ] && grep -qF "$PAM_MARK" "$session" && printf '%s\n' "$session"
  done
  return 0
}

# Removes the pam_limits lines tuning added once no tuning package needs them.
release_pam_limits() {
  local session tmp
  for session in $(unneeded_pam_lines); do
    tmp=$(mktemp "${session}.XXXXXX")
    grep -vF "$PAM_MARK" "$session" > "$tmp" || true
    chmod --reference="$session" "$tmp"
    mv "$tmp" "$session"
    echo "tuning: removed the pam_limits line it added to ${session}"
  done
}
