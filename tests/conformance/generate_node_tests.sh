#!/bin/sh
# Generates the ONNX backend node tests (model.onnx + test_data_set_*/{input,output}_*.pb) from
# Debian's python3-onnx into OUT, unless OUT/node already exists. Writes to OUT.tmp and renames, so
# an interrupted run leaves nothing half-written. numpy >= 1.24 removed the aliases (np.float, ...)
# that onnx 1.12's generators still use; they are restored for the generator only.
set -eu
OUT=${1:?usage: generate_node_tests.sh OUT_DIR}
if [ -d "$OUT/node" ]; then
  exit 0
fi
echo "conformance: generating ONNX backend node tests into $OUT (once; about a minute)"
rm -rf "$OUT.tmp"
mkdir -p "$(dirname "$OUT")"
/usr/bin/python3 -c "import numpy as np; [setattr(np,a,t) for a,t in [('float',float),('int',int),('bool',bool),('object',object),('complex',complex),('str',str)]]; import sys; sys.argv=['x','generate-data','-o','$OUT.tmp']; from onnx.backend.test import cmd_tools; cmd_tools.main()" >/dev/null
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
echo "conformance: $(ls "$OUT/node" | wc -l) node tests in $OUT/node"
