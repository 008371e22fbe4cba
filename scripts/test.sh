#!/usr/bin/env bash
# Runs every test of the project, from a fresh machine: installs what the tests need (idempotent,
# cached outside the work tree), then formatting, lints, the no-I/O check of skyhook-api, and the
# whole workspace's tests, cluster tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh
forget_builds_of_other_checkouts

step "installing test prerequisites"
scripts/setup.sh

step "checking formatting (cargo fmt)"
cargo fmt --all -- --check

step "linting (cargo clippy -D warnings)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "checking that skyhook-api builds alone, without I/O crates"
cargo check -p skyhook-api --locked
if cargo tree -p skyhook-api -e normal --prefix none | grep -E '^(tokio|hyper|axum|rustls|reqwest) ' ; then
  echo "skyhook-api must not depend on I/O crates (see DESIGN.md §2)" >&2
  exit 1
fi

step "running the tests (cargo test --workspace)"
log=$(mktemp "${TMPDIR:-/tmp}/skyhook-test.XXXXXX")
trap 'rm -f "$log"' EXIT
status=0
# Each test's line carries the seconds since the tests started, so a slow test shows in any log:
# a test's own time is its end minus the moment libtest says it "has been running for over 60
# seconds", plus 60. Read line by line by the shell itself: mawk, Debian's awk, reads a pipe in
# blocks and would stamp a whole block with the time it arrived.
stamp_test_lines() {
  local started=$SECONDS line
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in
      "test "*" ... "* | "test "*" has been running for over "*)
        printf '[+%ds] %s\n' "$((SECONDS - started))" "$line" ;;
      *) printf '%s\n' "$line" ;;
    esac
  done
}
cargo test --workspace --locked --no-fail-fast 2>&1 | stamp_test_lines | tee "$log" || status=$?

# One closing line over every test binary (cargo's own last line is often a crate's empty
# doc-test run, which reads as "no test ran").
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($i ~ /^passed;?$/) p += $(i-1); if ($i ~ /^failed;?$/) f += $(i-1); if ($i ~ /^ignored;?$/) s += $(i-1) } }
     END { printf "tests: %d passed, %d failed, %d skipped\n", p, f, s }' "$log"
exit "$status"
