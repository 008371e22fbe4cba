#!/usr/bin/env bash
# Builds the release archives of kubectl-skyhook for krew and renders the krew manifests with their
# checksums: krew/skyhook.yaml (`kubectl skyhook`) and krew/nodewright.yaml (`kubectl nodewright`),
# two krew plugins of the same archives, since krew links one command per plugin.
#
#   krew/build-archives.sh [--out DIR] [--binary PATH] [--require-all]
#
# For each platform of krew/skyhook.yaml (linux and darwin, amd64 and arm64) it builds
# `cargo build --release -p kubectl-skyhook --target <triple>` when this machine can: the host
# target always; another target only when its Rust standard library is installed and a linker
# for it is configured (CARGO_TARGET_<TRIPLE>_LINKER, or aarch64-linux-gnu-gcc for linux/arm64).
# Each archive, kubectl-skyhook_v<version>_<os>_<arch>.tar.gz, holds `kubectl-skyhook`, the same
# binary as `kubectl-nodewright` (it serves NodeWrights under that name), and `LICENSE`, and is
# byte-for-byte reproducible from the same binary. The rendered manifests, <out>/skyhook.yaml and
# <out>/nodewright.yaml, list the platforms built, with their sha256.
#
#   --out DIR      where archives and the manifest go (default $CARGO_TARGET_DIR/krew)
#   --binary PATH  package this already built kubectl-skyhook as the host platform and build
#                  nothing (the tests package their debug build this way)
#   --require-all  fail unless every platform of the manifest was built (for a release)
#
# Prints the rendered manifests' paths on stdout, nodewright.yaml first and skyhook.yaml last.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/common.sh

out="$CARGO_TARGET_DIR/krew"
binary=""
require_all=false
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=${2:?--out needs a directory}; shift 2 ;;
    --binary) binary=${2:?--binary needs a path}; shift 2 ;;
    --require-all) require_all=true; shift ;;
    -h|--help) sed -n '2,/^$/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "error: unknown argument $1 (see --help)" >&2; exit 1 ;;
  esac
done

templates=(krew/nodewright.yaml krew/skyhook.yaml)
# os/arch (krew's names) and the Rust target that builds it.
platforms=(
  "linux amd64 x86_64-unknown-linux-gnu"
  "linux arm64 aarch64-unknown-linux-gnu"
  "darwin amd64 x86_64-apple-darwin"
  "darwin arm64 aarch64-apple-darwin"
)

pkgid=$(cargo pkgid -p kubectl-skyhook --offline)
version=${pkgid##*[#@]}
host=$(rustc -vV | sed -n 's/^host: //p')

# Why `triple` cannot be built here; nothing when it can.
unbuildable_reason() {
  local triple=$1 libdir linker_var
  [ "$triple" = "$host" ] && return 0
  libdir=$(rustc --print target-libdir --target "$triple" 2>/dev/null || true)
  if ! compgen -G "$libdir/libstd-*.rlib" >/dev/null; then
    echo "the Rust standard library for $triple is not installed (rustup target add $triple)"
    return 0
  fi
  linker_var=CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$triple")_LINKER
  if [ -n "${!linker_var:-}" ]; then
    return 0
  fi
  if [ "$triple" = aarch64-unknown-linux-gnu ] && command -v aarch64-linux-gnu-gcc >/dev/null; then
    return 0
  fi
  echo "no linker for $triple (set $linker_var)"
}

# Builds kubectl-skyhook for `triple`; prints the binary's path.
build_for() {
  local triple=$1 linker_var cc_var
  linker_var=CARGO_TARGET_$(tr 'a-z-' 'A-Z_' <<<"$triple")_LINKER
  cc_var=CC_${triple//-/_}
  if [ "$triple" = aarch64-unknown-linux-gnu ] && [ -z "${!linker_var:-}" ]; then
    export "$linker_var=aarch64-linux-gnu-gcc"
    # ring compiles C code, so the C compiler must target aarch64 too.
    [ -n "${!cc_var:-}" ] || export "$cc_var=aarch64-linux-gnu-gcc"
  fi
  step "building kubectl-skyhook $version for $triple (release)"
  cargo build --release --locked -p kubectl-skyhook --target "$triple" >&2
  echo "$CARGO_TARGET_DIR/$triple/release/kubectl-skyhook"
}

# Writes <out>/<archive> from `bin`; prints the archive's sha256.
package() {
  local bin=$1 archive=$2 stage
  stage=$(mktemp -d "${TMPDIR:-/tmp}/kubectl-skyhook-archive.XXXXXX")
  install -m 0755 "$bin" "$stage/kubectl-skyhook"
  # A copy rather than a link: krew's installer copies regular files only.
  install -m 0755 "$bin" "$stage/kubectl-nodewright"
  install -m 0644 LICENSE "$stage/LICENSE"
  # Fixed order, owners and times, and no gzip timestamp: the same binary gives the same bytes.
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$stage" -cf - \
    kubectl-nodewright kubectl-skyhook LICENSE | gzip -9 -n >"$out/$archive"
  rm -rf -- "$stage"
  sha256sum "$out/$archive" | cut -d' ' -f1
}

mkdir -p "$out"
checksums=()
missing=()
for platform in "${platforms[@]}"; do
  read -r os arch triple <<<"$platform"
  archive="kubectl-skyhook_v${version}_${os}_${arch}.tar.gz"
  if [ -n "$binary" ]; then
    if [ "$triple" != "$host" ]; then
      missing+=("$os/$arch (--binary packages the host platform only)")
      continue
    fi
    built=$binary
    reported=$("$built" --version)
    if [ "$reported" != "Skyhook plugin: $version" ]; then
      echo "error: $built says \"$reported\", but kubectl-skyhook's Cargo.toml says $version; rebuild it" >&2
      exit 1
    fi
  else
    reason=$(unbuildable_reason "$triple")
    if [ -n "$reason" ]; then
      missing+=("$os/$arch ($reason)")
      continue
    fi
    built=$(build_for "$triple")
  fi
  sha=$(package "$built" "$archive")
  checksums+=("${os}_${arch}=$sha")
  echo "$out/$archive  sha256 $sha" >&2
done

if [ ${#missing[@]} -gt 0 ]; then
  printf 'not built: %s\n' "${missing[@]}" >&2
  if $require_all; then
    echo "error: --require-all: every platform of ${templates[*]} must be built" >&2
    exit 1
  fi
fi
if [ ${#checksums[@]} -eq 0 ]; then
  echo "error: no platform could be built" >&2
  exit 1
fi

# Render each template: every {{VERSION}}, and each platform entry with its checksum; an entry
# whose archive was not built is dropped.
render() {
  local template=$1 manifest
  manifest="$out/$(basename "$template")"
  awk -v version="$version" -v checksums="${checksums[*]}" '
    BEGIN {
      n = split(checksums, pairs, " ")
      for (i = 1; i <= n; i++) { split(pairs[i], kv, "="); sha[kv[1]] = kv[2] }
    }
    function flush(   key, text) {
      if (block == "") return
      text = block; block = ""
      if (match(text, /\{\{SHA256_[a-z0-9]+_[a-z0-9]+\}\}/)) {
        key = substr(text, RSTART + 9, RLENGTH - 11)
        if (!(key in sha)) return
        gsub("\\{\\{SHA256_" key "\\}\\}", sha[key], text)
      }
      printf "%s", text
    }
    { gsub(/\{\{VERSION\}\}/, version) }
    /^#/ && !started { next }
    { started = 1 }
    /^  platforms:/ { in_platforms = 1; print; next }
    in_platforms && /^    - / { flush() }
    in_platforms && /^  [^ ]/ { flush(); in_platforms = 0 }
    in_platforms { block = block $0 "\n"; next }
    { print }
    END { flush() }
  ' "$template" >"$manifest.tmp"
  if grep -n '{{' "$manifest.tmp" >&2; then
    echo "error: placeholders left in the rendered $manifest (above); fix $template" >&2
    exit 1
  fi
  {
    echo "# kubectl-skyhook v$version for krew (plugin $(basename "$template" .yaml)), rendered from $template by krew/build-archives.sh."
    echo "# Install from a local archive: kubectl krew install --manifest=$(basename "$template") --archive=<archive>"
    cat "$manifest.tmp"
  } >"$manifest"
  rm -f "$manifest.tmp"
  echo "rendered $manifest" >&2
  echo "$manifest"
}

for template in "${templates[@]}"; do
  render "$template"
done
