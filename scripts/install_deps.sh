#!/usr/bin/env bash
# Installs the Debian packages inferd needs to build, test and benchmark. Idempotent: when every
# package is already installed it only runs dpkg-query (well under a second).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache clang
  libonnx-dev libdnnl-dev libprotobuf-dev protobuf-compiler
  libgrpc++-dev protobuf-compiler-grpc libboost-dev
  libspdlog-dev libfmt-dev libcli11-dev rapidjson-dev
  zlib1g-dev  # HTTP gzip/deflate request and response bodies (src/server/http_compression.h)
  # the image pre-processor (src/kernels/cpu/image/): JPEG through libjpeg-turbo's libjpeg API,
  # PNG through libpng; its tests compare against PIL on scikit-image's sample photographs
  libjpeg62-turbo-dev libpng-dev python3-pil python3-skimage
  libgtest-dev libgmock-dev libbenchmark-dev
  sentencepiece  # spm_train/spm_encode: generation tests train tokenizers and check src/generation/sentencepiece_model.h
  python3-onnx python3-numpy python3-torch python3-torchvision python3-sklearn python3-requests
  libopenblas0-pthread  # an optimized BLAS for the PyTorch peer (the default reference BLAS is ~35x slower)
  prometheus python3-grpcio wrk curl
  python3-h2 openssl  # tests/server/hardening_grpc_test.py: raw HTTP/2 rapid-reset client, self-signed TLS certificates
  # generation (issue 12): the Python sentencepiece module trains the tokenizers; Jane Austen's
  # novels are the training text of the small decoder model
  python3-sentencepiece r-cran-janeaustenr
  # hardening (issue 15, docs/hardening.md): libFuzzer for the fuzz targets of fuzz/ (clang's
  # -fsanitize=fuzzer; libclang-rt-14-dev holds the ASan/UBSan/TSan and fuzzer runtimes clang links)
  libfuzzer-14-dev libclang-rt-14-dev
  haproxy  # routing over inferd nodes (docs/fleet.md, "Routing on HAProxy"; tests/fleet, deploy/fleet)
  libhiredis-dev  # the work queue's Redis client (src/workqueue/redis_client.h)
  redis-server  # tests/workqueue and bench/fleet/queue_bench.py start one on a loopback port
  # the live dashboard (issue 18, src/server/dashboard.h): Chart.js embedded into the binary at
  # build time; tests/server/dashboard_test.py drives headless Chromium with npm puppeteer-core
  libjs-chart.js chromium nodejs
)
# npm for the npm peers (puppeteer-core, onnxruntime-node, node-llama-cpp): Debian's package unless
# an npm is on PATH already (NodeSource's nodejs bundles npm and conflicts with Debian's).
if ! command -v npm >/dev/null; then PACKAGES+=(npm); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
