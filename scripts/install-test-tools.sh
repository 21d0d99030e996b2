#!/usr/bin/env bash
# Installs the tools the test suite drives for real (promtool and prometheus from Debian),
# only when they are missing. Idempotent; safe to run on every `make test`.
set -euo pipefail

need=()
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)

if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing test tools: ${need[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$(printf '%s\n' "${need[@]}" | sort -u)" >/dev/null
fi
