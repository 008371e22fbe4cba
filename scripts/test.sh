#!/usr/bin/env bash
# Runs every test of the project, from a fresh machine: installs what the tests need (idempotent,
# cached outside the work tree), then formatting, lints, the no-I/O check of skyhook-api, and the
# whole workspace's tests, cluster tests included.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh

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
cargo test --workspace --locked --no-fail-fast
