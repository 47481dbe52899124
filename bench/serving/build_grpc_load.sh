#!/bin/sh
# Builds bench/serving/grpc_load (the gRPC load generator) against the KServe protos that the main
# CMake build generates into BUILD (grpc_service*.pb.cc, model_config.pb.cc).
#   bench/serving/build_grpc_load.sh [BUILD=build] [OUT=BUILD/grpc_load]
set -eu
BUILD=${1:-build}
OUT=${2:-$BUILD/grpc_load}
HERE=$(dirname "$0")
for f in grpc_service.pb.cc grpc_service.grpc.pb.cc model_config.pb.cc; do
  [ -f "$BUILD/$f" ] || { echo "build_grpc_load: $BUILD/$f is missing (run make build)" >&2; exit 1; }
done
if [ "$OUT" -nt "$HERE/grpc_load.cc" ] && [ "$OUT" -nt "$BUILD/grpc_service.pb.cc" ]; then
  exit 0
fi
CXX=${CXX:-$(command -v ccache >/dev/null && echo "ccache c++" || echo c++)}
objs=""
for src in "$HERE/grpc_load.cc" "$BUILD/grpc_service.pb.cc" "$BUILD/grpc_service.grpc.pb.cc" \
           "$BUILD/model_config.pb.cc"; do
  obj="$OUT.$(basename "$src" .cc).o"
  $CXX -std=c++17 -O2 -I"$BUILD" $(pkg-config --cflags grpc++ protobuf) -c "$src" -o "$obj"
  objs="$objs $obj"
done
$CXX -o "$OUT" $objs $(pkg-config --libs grpc++ protobuf) -lpthread
rm -f $objs
echo "built $OUT"
