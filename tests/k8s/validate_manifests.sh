#!/usr/bin/env bash
# ctest k8s_manifests: validates deploy/k8s offline (deploy/k8s/validate/validate.mjs). Installs the
# pinned npm packages (package-lock.json) into WORK once with `npm ci`; kubectl, when installed,
# also builds the kustomization (`kubectl kustomize` needs no cluster; `kubectl apply
# --dry-run=client` does, to download the OpenAPI schema, so it is not used).
# Usage: validate_manifests.sh SOURCE_DIR WORK_DIR. Exit 77 (skipped) without node and npm.
set -euo pipefail
src=$1
work=$2
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "skipped: node and npm are needed (kubernetes-models)"
  exit 77
fi
mkdir -p "$work"
cp "$src/deploy/k8s/validate/package.json" "$src/deploy/k8s/validate/package-lock.json" \
   "$src/deploy/k8s/validate/validate.mjs" "$work/"
if ! cmp -s "$work/package-lock.json" "$work/node_modules/.package-lock.json.installed" 2>/dev/null; then
  (cd "$work" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
  cp "$work/package-lock.json" "$work/node_modules/.package-lock.json.installed"
fi
kubectl_arg=()
if command -v kubectl >/dev/null; then kubectl_arg=(--kubectl kubectl); else echo "note: no kubectl; kustomize build skipped"; fi
cd "$work"
node validate.mjs --dir "$src/deploy/k8s" --metrics-source "$src/src/server/metrics.cc" \
  "${kubectl_arg[@]}" --self-test
