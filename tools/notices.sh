#!/usr/bin/env bash
# Regenerates THIRD-PARTY-NOTICES.md from Cargo.lock with cargo-about (about.toml, the
# template tools/notices.hbs): run it after any change to Cargo.lock, and commit the file.
# CI does not build cargo-about (five minutes of compiling); it checks that the file lists
# exactly the crates Cargo.lock builds into binder (.ci/notices).
#   cargo install cargo-about --locked --features cli     # once
#   tools/notices.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-about >/dev/null || { echo "notices: cargo-about is missing: cargo install cargo-about --locked --features cli" >&2; exit 1; }
cargo about generate --fail tools/notices.hbs -o THIRD-PARTY-NOTICES.md
python3 .ci/notices
