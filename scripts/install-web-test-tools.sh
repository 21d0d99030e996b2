#!/usr/bin/env bash
# Installs headless Chromium (Debian `chromium`) for the dashboard and report tests
# (tests/it/web.rs), only when it is missing. Idempotent; safe to run on every `make test`.
set -euo pipefail

if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing test tools: chromium" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    chromium fonts-dejavu-core >/dev/null
fi
