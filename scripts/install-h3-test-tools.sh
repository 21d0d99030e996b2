#!/usr/bin/env bash
# Installs what tests/it/h3.rs needs, only when missing or at another version. Idempotent;
# `make tools` runs it. From PyPI, pinned: hypercorn with its `h3` extra (aioquic, an
# HTTP/3 and QUIC server; its wheels carry their compiled parts), serving the test's ASGI
# app (tests/it/h3/app.py) over HTTP/3 and, on the same port over TCP, HTTP/1.1 and HTTP/2
# with `Alt-Svc: h3`.
set -euo pipefail

PY=${PYTHON:-python3}
pins=(
  "hypercorn==0.18.0"
  "aioquic==1.7.2"
)

have() { # name version
  "$PY" - "$1" "$2" <<'PYEOF' >/dev/null 2>&1
import sys
from importlib.metadata import version
sys.exit(0 if version(sys.argv[1]) == sys.argv[2] else 1)
PYEOF
}

need=()
for pin in "${pins[@]}"; do
  name=${pin%%==*}
  ver=${pin##*==}
  have "$name" "$ver" || need+=("$pin")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]} from PyPI" >&2
  "$PY" -m pip install --quiet --disable-pip-version-check "${need[@]}" >&2
fi
"$PY" -c 'import hypercorn, aioquic' >/dev/null
