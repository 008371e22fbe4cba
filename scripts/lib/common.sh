# Shared by the project's scripts: where caches live and how progress is printed.
# Caches live outside the work tree so a fresh clone (CI) reuses earlier builds on the same machine.
export SKYHOOK_CACHE="${SKYHOOK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/skyhook-rs}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$SKYHOOK_CACHE/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
mkdir -p "$SKYHOOK_CACHE"

# A test binary keeps the path of the checkout it was built in (env!("CARGO_MANIFEST_DIR") finds
# its fixtures), and cargo does not rebuild it for the same sources in another directory: a
# second clone sharing the build cache would run the first one's binaries, reading the first
# clone's files or failing when it is gone. When the checkout building here changes, the
# workspace's own crates are rebuilt; their dependencies stay cached.
# Usage, from the repository's root: forget_builds_of_other_checkouts
forget_builds_of_other_checkouts() {
  local marker="$CARGO_TARGET_DIR/.checkout" here previous
  here=$(pwd -P)
  previous=$(cat "$marker" 2>/dev/null || true)
  if [ -n "$previous" ] && [ "$previous" != "$here" ]; then
    step "the build cache was last used by $previous; rebuilding the workspace's crates for $here"
    cargo clean --workspace --quiet
    cargo clean --workspace --release --quiet
  fi
  mkdir -p "$CARGO_TARGET_DIR"
  echo "$here" > "$marker"
}

_step_started=$(date +%s)
step() {
  local now; now=$(date +%s)
  printf '\n==> [%s, +%ss] %s\n' "$(date -u +%H:%M:%S)" "$((now - _step_started))" "$*" >&2
}

# Ends a setup script when its cached build is there: prints <output> on stdout and returns at
# once. Usage: exit_if_built <what> <output> [<executable>...]; the executables default to
# <output>.
exit_if_built() {
  local what=$1 output=$2 file
  shift 2
  [ "$#" -gt 0 ] || set -- "$output"
  for file in "$@"; do
    [ -x "$file" ] || return 0
  done
  echo "$what already built: $output" >&2
  echo "$output"
  exit 0
}

# Waits while a background build runs, calling <report> <now> every 30 s (checked every 5 s)
# from <started> on. Usage: watch_build <pid> <started> <report>
watch_build() {
  local pid=$1 last_report=$2 report=$3 now
  while kill -0 "$pid" 2>/dev/null; do
    sleep 5
    now=$(date +%s)
    if [ $((now - last_report)) -ge 30 ]; then
      last_report=$now
      "$report" "$now"
    fi
  done
}

# Fails, saying which Go is needed, when the Go toolchain is missing.
# Usage: require_go <what is built> <which Go version>
require_go() {
  command -v go >/dev/null 2>&1 || {
    echo "error: the Go toolchain is needed to build $1; install Go (>= $2)" >&2
    exit 1
  }
}
