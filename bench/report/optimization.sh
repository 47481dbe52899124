#!/bin/sh
# The optimization report (see optimization.py): builds inferd, exports the models if needed, and
# prints the markdown tables for the DLRM recommender and ResNet-50.
#   bench/report/optimization.sh [BUILD_DIR] [extra optimization.py flags]
set -e
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
[ $# -gt 0 ] && shift
cmake --build "$BUILD" --target inferd >/dev/null
/usr/bin/python3 scripts/export_models.py --out "$BUILD/models" --only dlrm >/dev/null
/usr/bin/python3 scripts/export_models.py --out "$BUILD/models" --only resnet50 >/dev/null
exec /usr/bin/python3 bench/report/optimization.py --inferd "$BUILD/inferd" \
  --models-dir "$BUILD/models" --work-dir "$BUILD/optimization_report" "$@"
