#!/usr/bin/env bash
# Installs the tools the test suite drives for real, only when they are missing: promtool and
# prometheus (Debian `prometheus`) and Alertmanager (Debian `prometheus-alertmanager`, which
# installs /usr/bin/prometheus-alertmanager; upstream tarballs call it `alertmanager`), and nginx
# (Debian `nginx`, the stall test's target), nghttpd and h2load (Debian `nghttp2-server` and
# `nghttp2-client`: the HTTP/2 tests' server, and the HTTP/2 benchmark's peer).
# Idempotent; safe to run on every `make test`.
set -euo pipefail

need=()
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
if ! command -v prometheus-alertmanager >/dev/null 2>&1 &&
  ! command -v alertmanager >/dev/null 2>&1; then
  need+=(prometheus-alertmanager)
fi
# nginx: the fast target of the CPU-stall test (tests/it/storm.rs starts its own on 127.0.0.1).
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || need+=(nginx)
# nghttpd: the real HTTP/2 server of tests/it/h2.rs (h2c and ALPN over TLS); h2load: the peer of
# the HTTP/2 benchmark.
command -v nghttpd >/dev/null 2>&1 || need+=(nghttp2-server)
command -v h2load >/dev/null 2>&1 || need+=(nghttp2-client)
# setcap: tests/it/daemon.rs gives a copy of the binary a file capability (glibc's secure mode).
command -v setcap >/dev/null 2>&1 || [ -x /usr/sbin/setcap ] || [ -x /sbin/setcap ] || need+=(libcap2-bin)

if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  # One argument per package (the list may hold duplicates and more than one name).
  mapfile -t pkgs < <(printf '%s\n' "${need[@]}" | sort -u)
  echo "installing test tools: ${pkgs[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi
