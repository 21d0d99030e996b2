#!/usr/bin/env bash
# Builds the release binary that the container image ships. The Dockerfile's build stage runs
# this very script, so the image and a local build use the same cargo flags. No Docker needed:
#   bash scripts/build-image-binary.sh   # -> target/release/sloburn
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=target/release/sloburn

# --locked: exactly Cargo.lock's versions. Release profile; symbols stripped for a small image.
export CARGO_PROFILE_RELEASE_STRIP=symbols
cargo build --release --locked --bin sloburn

"./$OUT" --version
ls -l "$OUT"
