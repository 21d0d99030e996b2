#!/usr/bin/env bash
# Installs the Argo Rollouts CRD schemas for tests/it/argo.rs: the npm package
# `@kubernetes-models/argo-rollouts` (pinned; JSON schemas generated from Argo Rollouts' CRDs,
# with their validators), into its own folder outside the repository, and a validator script
# beside it (`validate.mjs FILE.json` prints `valid` or the first problem, exit 1). No PyPI
# package ships these schemas, and none ships Flagger's. Idempotent: does nothing when that
# version is already there. Prints the folder on stdout.
set -euo pipefail

VERSION="2.0.0"
DIR="${SLOBURN_TOOLS:-$HOME/.cache/sloburn-tools}/argo-rollouts-models"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing test tools: nodejs npm" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
fi

PKG="$DIR/node_modules/@kubernetes-models/argo-rollouts/package.json"
if ! { [ -f "$PKG" ] && grep -q "\"version\": \"$VERSION\"" "$PKG" && [ -f "$DIR/validate.mjs" ]; }; then
  echo "installing @kubernetes-models/argo-rollouts@$VERSION from npm" >&2
  mkdir -p "$DIR"
  (cd "$DIR" && npm install --silent --no-audit --no-fund --no-save \
    "@kubernetes-models/argo-rollouts@$VERSION" >&2)
  cat >"$DIR/validate.mjs" <<'JS'
// Validates one AnalysisTemplate (JSON) against Argo Rollouts' CRD schema.
import { AnalysisTemplate } from "@kubernetes-models/argo-rollouts/argoproj.io/v1alpha1/AnalysisTemplate";
import fs from "node:fs";
const doc = JSON.parse(fs.readFileSync(process.argv[2], "utf8"));
try {
  new AnalysisTemplate(doc).validate();
  console.log("valid");
} catch (e) {
  console.log("invalid: " + e.message);
  process.exit(1);
}
JS
fi
echo "$DIR"
