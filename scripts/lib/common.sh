# Shared by the project's scripts: where caches live and how progress is printed.
# Caches live outside the work tree so a fresh clone (CI) reuses earlier builds on the same machine.
export SKYHOOK_CACHE="${SKYHOOK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/skyhook-rs}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$SKYHOOK_CACHE/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
mkdir -p "$SKYHOOK_CACHE"

_step_started=$(date +%s)
step() {
  local now; now=$(date +%s)
  printf '\n==> [%s, +%ss] %s\n' "$(date -u +%H:%M:%S)" "$((now - _step_started))" "$*" >&2
}
