#!/bin/sh
# `make run`: exports the example models (scripts/export_models.py; cached, so only the first run
# is slow), builds the trained tiny-llama (scripts/generation/build_models.py, what `make
# gen-models` runs; cached in MODELS_DIR/gen, a few minutes of training the first time), writes
# the example repository (tests/cli/example_repository.py), prints example curl commands and
# serves the repository in the foreground until Ctrl-C.
#   tests/cli/serve_examples.sh INFERD MODELS_DIR REPOSITORY [HTTP_PORT GRPC_PORT METRICS_PORT]
set -eu
INFERD=${1:?usage: serve_examples.sh INFERD MODELS_DIR REPOSITORY [HTTP GRPC METRICS ports]}
MODELS=${2:?}
REPO=${3:?}
HTTP_PORT=${4:-8000}
GRPC_PORT=${5:-8001}
METRICS_PORT=${6:-8002}
/usr/bin/python3 scripts/export_models.py --out "$MODELS"
GEN_MODELS=$MODELS/gen
if [ -f scripts/generation/build_models.py ]; then
  /usr/bin/python3 scripts/generation/build_models.py --out "$GEN_MODELS" --only tiny-llama
fi
/usr/bin/python3 tests/cli/example_repository.py --models "$MODELS" --out "$REPO" \
  --gen-models "$GEN_MODELS"
H=http://127.0.0.1:$HTTP_PORT
cat <<MSG

=== inferd serves $REPO (KServe v2: HTTP $HTTP_PORT, gRPC $GRPC_PORT, metrics $METRICS_PORT)
Once the log says "HTTP KServe v2 listening", try (Ctrl-C stops the server):

  curl -i $H/v2/health/ready
  curl -s $H/v2/models/dlrm
  curl -s $H/v2/models/identity/infer -d '{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16], "data": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}]}'
  curl -s $H/v2/models/dlrm/infer -d '{"inputs": [{"name": "dense_features", "datatype": "FP32", "shape": [1, 13], "data": [0,1,2,3,4,5,6,7,8,9,10,11,12]}, {"name": "sparse_ids", "datatype": "INT64", "shape": [1, 8, 4], "data": [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32]}]}'
  curl -s $H/v2/models/dlrm/stats
  curl -s -X POST $H/v2/repository/index
  curl -s http://127.0.0.1:$METRICS_PORT/metrics | grep -E '^inferd_(request_success|inference_count)'

The generative tiny-llama (trained on Jane Austen) on the OpenAI-compatible API, streamed:

  curl -sN $H/v1/chat/completions -H 'Content-Type: application/json' -d '{"model": "tiny-llama", "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 48, "messages": [{"role": "user", "content": "Do you not think Mr. Bingley very agreeable?"}]}'
  curl -s $H/v1/completions -d '{"model": "tiny-llama", "prompt": "It is a truth universally acknowledged", "max_tokens": 32, "temperature": 0}'
  curl -s $H/v2/models/tiny-llama/generate -d '{"text_input": "Emma Woodhouse, handsome, clever, and rich,", "parameters": {"max_tokens": 32}}'
  curl -s http://127.0.0.1:$METRICS_PORT/metrics | grep -E '^inferd_(time_to_first_token|generation_tokens|kv_cache_usage)'

Load tests and their results: docs/serving.md (bench/serving/run_bench.py).

MSG
# libgomp threads busy-wait between parallel regions, taking the cores the HTTP/gRPC threads need
# (docs/benchmarks.md); a server waits for requests, so let them sleep unless told otherwise.
OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE} exec "$INFERD" serve --model-repository "$REPO" \
  --http-port "$HTTP_PORT" --grpc-port "$GRPC_PORT" --metrics-port "$METRICS_PORT"
