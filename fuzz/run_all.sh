#!/usr/bin/env bash
# Runs every fuzz target of build-fuzz/ at once, at the lowest CPU priority, for SECONDS each
# (docs/hardening.md: the long runs; CI runs `make fuzz-smoke` instead), then prints one line per
# target: executions, exec/s, coverage, corpus size, and any crash / leak / timeout / oom input.
#
#   fuzz/run_all.sh 3600 [BUILD_DIR]      # BUILD_DIR default build-fuzz (built by `make fuzz`)
#   TARGETS="npy onnx" fuzz/run_all.sh 600   # a subset
#
# New corpus entries go to BUILD_DIR/corpus/<target> (the committed fuzz/corpus/<target> is read,
# never written); findings to BUILD_DIR/findings/<target>-{crash,leak,timeout,oom}-*. A finding is
# committed by hand: its input into fuzz/corpus/<target>/crash_<what>, plus a unit test.
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:?usage: fuzz/run_all.sh SECONDS [BUILD_DIR]}
BUILD=${2:-build-fuzz}
read -r -a TARGETS <<< "${TARGETS:-http_codec grpc_codec openai_codec model_config onnx npy}"
SUPP=$PWD/tests/sanitizers
export ASAN_OPTIONS=detect_leaks=1:suppressions=$SUPP/asan.supp
export LSAN_OPTIONS=suppressions=$SUPP/lsan.supp
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$SUPP/ubsan.supp
mkdir -p "$BUILD/findings"
pids=()
for t in "${TARGETS[@]}"; do
  mkdir -p "$BUILD/corpus/$t"
  # -fork=1 keeps fuzzing after a finding (each finding saved, the run goes on to the end).
  # -timeout=60, not fuzz-smoke's 25: at nice 19 on a loaded machine an input that runs in 1 s
  # can wait longer than 25 s for a CPU (spurious timeouts were seen with 25).
  nice -n 19 "$BUILD/fuzz/${t}_fuzz" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 \
    -max_len=65536 -timeout=60 -print_final_stats=1 -fork=1 -ignore_crashes=1 -ignore_ooms=1 \
    -ignore_timeouts=1 -artifact_prefix="$BUILD/findings/$t-" \
    "$BUILD/corpus/$t" "fuzz/corpus/$t" > "$BUILD/findings/$t.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
for t in "${TARGETS[@]}"; do
  log="$BUILD/findings/$t.log"
  # Fork mode's status line: "#EXECS: cov: C ft: F corp: N exec/s E oom/timeout/crash: a/b/c time: Ts"
  last=$(grep -E '^#[0-9]+:' "$log" | tail -1)
  found=$(ls "$BUILD/findings" | grep -c "^$t-\(crash\|leak\|timeout\|oom\)" || true)
  echo "$t: findings saved $found; last status: ${last:-none (see $log)}"
done
