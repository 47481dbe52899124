#!/bin/bash
# Whole-model check of the optimizer: writes each exported model optimized at LEVEL with
# `inferd optimize` (which re-imports it through the ONNX checker), then runs check_model.py on the
# optimized files against the PyTorch references, every case of every model.
#
#   tests/models/check_optimized.sh build/inferd build/models [extended] [bert_base resnet50 ...]
#
# Exit code 0 when every model optimizes and every case passes.
set -u
inferd=${1:?usage: check_optimized.sh INFERD MODELS_DIR [LEVEL] [MODEL...]}
models=${2:?usage: check_optimized.sh INFERD MODELS_DIR [LEVEL] [MODEL...]}
level=${3:-extended}
shift $(( $# < 3 ? $# : 3 ))
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(resnet50 mobilenet_v2 bert_base dlrm)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rc=0
for m in "${names[@]}"; do
  src="$models/$m"
  if [ ! -f "$src/model.onnx" ]; then
    echo "SKIP $m: $src/model.onnx missing (scripts/export_models.py)"
    continue
  fi
  mkdir -p "$work/$m"
  for f in "$src"/*; do
    [ "$(basename "$f")" = model.onnx ] || ln -s "$(realpath "$f")" "$work/$m/"
  done
  if ! "$inferd" optimize "$src/model.onnx" -o "$work/$m/model.onnx" --level "$level" --report \
      > "$work/$m.report" 2>&1; then
    echo "FAIL $m: inferd optimize"; cat "$work/$m.report"; rc=1; continue
  fi
  tail -1 "$work/$m.report"
  out=$(/usr/bin/python3 "$here/check_model.py" --inferd "$inferd" --models-dir "$work" \
      --model "$m" 2>&1) || rc=1
  grep -E '^(PASS|FAIL)' <<< "$out"
done
exit $rc
