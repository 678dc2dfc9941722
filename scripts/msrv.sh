#!/usr/bin/env bash
# The MSRV job: the workspace builds with the Rust it declares (`rust-version` in Cargo.toml).
#
# With the declared toolchain installed (or installable: `rustup toolchain install`), this is
# `cargo +MSRV check` of the libraries and binaries: what a user builds with that Rust (the
# tests and benches are built by the contributor's own toolchain, and clippy checks them). A
# check, not a build: no code is generated. `msrv.sh --install` only fetches the toolchain
# (scripts/test.sh does that beside the build, so the check does not wait for a download). Where it cannot be had (no network to the Rust
# distribution server, as on the project's build machine), two checks that need no toolchain
# still run, and the script says plainly that the build itself was skipped:
#   - no dependency in Cargo.lock declares a rust-version above ours;
#   - clippy's `incompatible_msrv` lint (std APIs newer than MSRV) is on in scripts/test.sh's
#     clippy run, which reads the same rust-version.
set -euo pipefail
cd "$(dirname "$0")/.."

msrv=$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' Cargo.toml | head -1)
if [[ -z "$msrv" ]]; then
  echo "msrv: no rust-version in Cargo.toml" >&2
  exit 1
fi

have_toolchain() {
  rustup run "$msrv" rustc --version >/dev/null 2>&1 \
    || rustup toolchain install "$msrv" --profile minimal >/dev/null 2>&1
}
if [[ "${1:-}" == --install ]]; then
  have_toolchain && echo "msrv: Rust $msrv installed" || echo "msrv: Rust $msrv cannot be fetched"
  exit 0
fi

if have_toolchain; then
  echo "msrv: cargo +$msrv check --workspace --locked"
  cargo "+$msrv" check --workspace --locked
  exit 0
fi

echo "msrv: Rust $msrv is not installed and cannot be fetched here; the build with it is SKIPPED."
echo "msrv: checking that no dependency needs a newer Rust than $msrv instead."
cargo metadata --format-version 1 --locked | python3 -c '
import json, sys
msrv = tuple(int(p) for p in sys.argv[1].split("."))
def version(text):
    parts = [int(p) for p in text.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))
packages = json.load(sys.stdin)["packages"]
newer = sorted(
    f"{p[\"name\"]} {p[\"version\"]} needs Rust {p[\"rust_version\"]}"
    for p in packages
    if p.get("rust_version") and version(p["rust_version"]) > version(sys.argv[1])
)
if newer:
    print("msrv: these dependencies need a newer Rust than " + sys.argv[1] + ":", *newer, sep="\n  ")
    sys.exit(1)
print(f"msrv: all {len(packages)} packages declare rust-version <= {sys.argv[1]} (or none)")
' "$msrv"
