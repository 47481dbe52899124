#!/bin/sh
# `make run`: exports the example models (scripts/export_models.py; cached, so only the first run
# is slow), then runs `inferd inspect` and `inferd run` on each with its reference inputs, and
# prints a summary with the largest difference from PyTorch's outputs.
#   tests/cli/run_examples.sh INFERD MODELS_DIR OUTPUT_DIR
set -eu
INFERD=${1:?usage: run_examples.sh INFERD MODELS_DIR OUTPUT_DIR}
MODELS=${2:?}
OUT=${3:?}
/usr/bin/python3 scripts/export_models.py --out "$MODELS"
mkdir -p "$OUT"
summary=""
status=0
for dir in "$MODELS"/*/; do
  dir=${dir%/}
  [ -f "$dir/manifest.json" ] || continue
  name=$(basename "$dir")
  echo
  echo "=== $name: inferd inspect"
  "$INFERD" inspect "$dir/model.onnx" || true
  set --
  for f in "$dir"/inputs/*.npy; do
    [ -f "$f" ] && set -- "$@" --input "$(basename "$f" .npy)=$f"
  done
  echo "=== $name: inferd run"
  rm -rf "$OUT/$name"
  if "$INFERD" run "$dir/model.onnx" "$@" --output-dir "$OUT/$name" > "$OUT/$name.log" 2>&1; then
    cat "$OUT/$name.log"
    timing=$(grep -E '^load .* ms' "$OUT/$name.log" || true)
    diff=$(/usr/bin/python3 - "$dir/expected" "$OUT/$name" <<'PY'
import os, sys
import numpy as np
exp_dir, out_dir = sys.argv[1], sys.argv[2]
worst = 0.0
for f in sorted(os.listdir(exp_dir)):
    want = np.load(os.path.join(exp_dir, f))
    path = os.path.join(out_dir, f)
    if not os.path.exists(path):
        print(f"missing output {f}")
        sys.exit(0)
    got = np.load(path)
    if got.shape != want.shape:
        print(f"{f}: shape {got.shape} != {want.shape}")
        sys.exit(0)
    worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - want))) if want.size else 0.0)
print(f"max |inferd - pytorch| = {worst:.3g}")
PY
)
    summary="$summary
  $name: ok; $timing; $diff"
  else
    cat "$OUT/$name.log"
    summary="$summary
  $name: FAILED ($(tail -n 1 "$OUT/$name.log"))"
    status=1
  fi
  rm -f "$OUT/$name.log"
done
echo
echo "=== summary (outputs in $OUT)$summary"
exit $status
