#!/usr/bin/env bash
# Installs what tests/it/otel.rs needs, only when missing or at another version. Idempotent;
# `make tools` runs it. From PyPI, pinned:
# - opentelemetry-proto: the official OTLP protobuf definitions, generated for Python; the
#   test's OTLP receiver (tests/it/otel/receiver.py) decodes `/v1/traces` bodies with it.
#   It brings its runtime, `protobuf`.
# - grpcio: the gRPC server of the receiver's `--grpc` mode (OTLP/gRPC), and of
#   tests/it/grpc/server.py (tests/it/grpc.rs).
# - grpcio-reflection, grpcio-health-checking: gRPC's own server reflection and health
#   services, served by tests/it/grpc/server.py.
# Prometheus (for the exemplar test) comes from install-test-tools.sh (Debian's package).
set -euo pipefail

PY=${PYTHON:-python3}
pins=(
  "opentelemetry-proto==1.45.2"
  "grpcio==1.85.1"
  "grpcio-reflection==1.85.1"
  "grpcio-health-checking==1.85.1"
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
"$PY" -c 'import grpc; from opentelemetry.proto.collector.trace.v1 import trace_service_pb2' >/dev/null
"$PY" -c 'from grpc_reflection.v1alpha import reflection; from grpc_health.v1 import health' >/dev/null
