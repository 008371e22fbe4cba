#!/bin/bash
# Runs the script for one lifecycle stage that the Skyhook resource supplies through the
# package's configMap: key "<stage>.sh" (apply.sh, apply_check.sh, config.sh, ...).
#
# The script is sourced, so it shares this shell: it sees "$SKYHOOK_DIR" (the package copy on
# the host, with the configMap under configmaps/) and every variable the agent passes, and its
# `exit` code is the step's. A stage without a script is a successful no-op.

stage="${1:-}"
case "$stage" in
  apply | apply_check | config | config_check | post_interrupt | post_interrupt_check | uninstall | uninstall_check) ;;
  *)
    echo "shellscript: unknown stage '${stage}'; expected one of apply, apply_check, config, config_check, post_interrupt, post_interrupt_check, uninstall, uninstall_check" >&2
    exit 2
    ;;
esac

if [ -z "${SKYHOOK_DIR:-}" ]; then
  echo "shellscript: SKYHOOK_DIR is not set; run this through skyhook-agent" >&2
  exit 2
fi

script="${SKYHOOK_DIR}/configmaps/${stage}.sh"
if [ ! -f "$script" ]; then
  echo "shellscript: the configMap has no ${stage}.sh; nothing to do for ${stage}"
  exit 0
fi

echo "shellscript: running ${stage}.sh from the configMap"
# shellcheck source=/dev/null
. "$script"
