#!/bin/bash
# config: write the custom profiles and scripts of the configMap, then activate tuned_profile.
set -uo pipefail
. "$(dirname "$0")/tuned_lib.sh"

have tuned-adm || fail "tuned-adm is missing; apply the package first"
profiles=$(wanted_profiles)
[ -n "$profiles" ] || fail "${PROFILE_KEY} is empty; set it to the profile name(s) to activate"

mkdir -p "$TUNED_DIR/scripts"
written=$(mktemp)
for key in "$CONFIGMAPS"/*; do
  [ -f "$key" ] || continue
  name=$(basename "$key")
  [ "$name" = "$PROFILE_KEY" ] && continue
  case "$name" in
    *_script)
      install -m 0755 "$key" "$TUNED_DIR/scripts/$name" || fail "could not write $TUNED_DIR/scripts/$name"
      echo "$TUNED_DIR/scripts/$name" >> "$written"
      ;;
    *)
      mkdir -p "$TUNED_DIR/$name"
      install -m 0644 "$key" "$TUNED_DIR/$name/tuned.conf" || fail "could not write $TUNED_DIR/$name/tuned.conf"
      echo "$TUNED_DIR/$name/tuned.conf" >> "$written"
      ;;
  esac
  echo "tuned: wrote $(tail -n 1 "$written")"
done
# Remove what an earlier configMap had and this one does not.
if [ -f "$MANAGED_LIST" ]; then
  while IFS= read -r old; do
    if ! grep -qxF "$old" "$written"; then
      rm -f "$old"
      rmdir "$(dirname "$old")" 2> /dev/null || true
      echo "tuned: removed ${old}"
    fi
  done < "$MANAGED_LIST"
fi
mv "$written" "$MANAGED_LIST"

available=$(tuned-adm list 2> /dev/null) || fail "tuned-adm list failed; is the tuned service running?"
for profile in $profiles; do
  printf '%s\n' "$available" | grep -Eq "^- ${profile}( |$)" \
    || fail "profile '${profile}' is not in 'tuned-adm list'; add it as a configMap key or fix ${PROFILE_KEY}"
done
# shellcheck disable=SC2086 # one argument per profile
tuned-adm profile $profiles || fail "tuned-adm profile ${profiles} failed (several profiles at once need a recent tuned)"
echo "tuned: active profile(s): ${profiles}"
