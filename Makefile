# inferd: the two set-up commands are `make run` and `make test`; both install what they need.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test unit thread-safety conformance run clean gen-models gen-models-large \
  asan tsan fuzz fuzz-smoke soak dashboard-screenshot

all: build

deps:
	@scripts/install_deps.sh

$(BUILD)/build.ninja:
	@scripts/install_deps.sh
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  $$(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache) $(CMAKE_FLAGS)

configure: $(BUILD)/build.ninja

build: deps configure
	cmake --build $(BUILD) -j $(JOBS)

# Unit tests, the real-model checks against PyTorch (models exported once into $(BUILD)/models),
# then the ONNX backend conformance suite (fails below the committed floor).
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE slow
	cd $(BUILD) && ctest --output-on-failure -j 1 -L models
	$(MAKE) --no-print-directory conformance

unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE slow

# Clang's thread-safety analysis (-Wthread-safety as errors, -fsyntax-only) over the sources that
# use the lock annotations of src/common/thread_annotations.h: scripts/check_thread_safety.sh.
# Needs the build (compile_commands.json, generated protobuf headers). .ci/run runs it.
thread-safety: build
	JOBS=$(JOBS) scripts/check_thread_safety.sh $(BUILD)

# ONNX backend node tests, generated once from Debian's python3-onnx into $(ONNX_NODE_TESTS).
# The full log goes to $(BUILD)/conformance.log; failures and the total are printed. Fails when
# fewer tests pass than tests/conformance/floor.txt. FILTER=regex runs a subset (no floor check).
ONNX_NODE_TESTS ?= $(BUILD)/onnx-node-tests
FILTER ?=
conformance: build
	@tests/conformance/generate_node_tests.sh $(ONNX_NODE_TESTS)
	@rc=0; \
	if [ -n "$(FILTER)" ]; then floor=""; else floor="--min-pass $$(cat tests/conformance/floor.txt)"; fi; \
	$(BUILD)/inferd_conformance --data $(ONNX_NODE_TESTS) --list-failures \
	  $(if $(FILTER),--filter '$(FILTER)') $$floor > $(BUILD)/conformance.log || rc=$$?; \
	grep -v -E '^(PASS|FAIL|UNSUPPORTED) ' $(BUILD)/conformance.log; \
	echo "conformance: full log in $(BUILD)/conformance.log"; exit $$rc

# Exports the example models (scripts/export_models.py, cached in $(BUILD)/models), writes the
# example repository $(BUILD)/example_repository, prints example curl commands and serves it in
# the foreground (Ctrl-C stops). SUMMARY=1 first runs `inferd inspect`/`inferd run` on each model
# and prints a summary (tests/cli/run_examples.sh). Ports: HTTP_PORT, GRPC_PORT, METRICS_PORT.
HTTP_PORT ?= 8000
GRPC_PORT ?= 8001
METRICS_PORT ?= 8002
SUMMARY ?=
run: build
	@$(if $(SUMMARY),tests/cli/run_examples.sh $(BUILD)/inferd $(BUILD)/models $(BUILD)/run_outputs &&) \
	tests/cli/serve_examples.sh $(BUILD)/inferd $(BUILD)/models $(BUILD)/example_repository \
	  $(HTTP_PORT) $(GRPC_PORT) $(METRICS_PORT)

# Decoder models of the generation engine (scripts/generation/build_models.py, GEN.md section 1),
# cached in $(BUILD)/models/gen: gen-models builds the small ones (test-llama, test-gpt2 and the
# Jane Austen tiny-llama, trained on 2 threads in a few minutes); gen-models-large the random
# ~110M/350M benchmark models. A rerun with everything present does nothing.
GEN_MODELS ?= $(BUILD)/models/gen
GEN_SMALL = test-llama test-gpt2 test-moe tiny-llama tiny-llama-draft
GEN_LARGE = llama-110m gpt2-110m llama-350m moe-240m
gen-models: deps
	@for m in $(GEN_SMALL); do [ -f $(GEN_MODELS)/$$m/config.json ] || { \
	  /usr/bin/python3 scripts/generation/build_models.py --out $(GEN_MODELS); exit $$?; }; done

gen-models-large: deps
	@for m in $(GEN_LARGE); do [ -f $(GEN_MODELS)/$$m/config.json ] || { \
	  /usr/bin/python3 scripts/generation/build_models.py --out $(GEN_MODELS) --large; exit $$?; }; done

# ---- Hardening (docs/hardening.md): sanitizer builds, fuzzers, soak ----
# Each sanitizer build has its own directory, configured with -DINFERD_SANITIZE (CMakeLists.txt:
# -O1, line tables, every project target instrumented), as unity builds of SAN_UNITY_BATCH (8)
# sources per compile (CMAKE_UNITY_BUILD; SAN_UNITY_BATCH= turns it off; never the Release or fuzz
# build): a sanitizer instruments every inline function of Beast, gRPC, protobuf and gtest again in
# each translation unit that uses it, and a batch compiles those once (the saving:
# docs/hardening.md, "Measured"). `make asan`: ASan+UBSan over
# the unit tests and the server end-to-end tests (the kernel library and the gtest binaries' own
# code with ASan only: UBSan roughly doubles the compile time of their templated code and finds
# nothing there that ASan does not). `make tsan`: TSan over the scheduler, serving and server tests
# (gtest binaries) and the server end-to-end test; OpenMP runs one thread (libgomp is not
# instrumented, so its barriers would be invisible to TSan). Suppressions with their reasons:
# tests/sanitizers/*.supp. Cold-build figures: docs/hardening.md, "Measured".
SAN_UNITY_BATCH ?= 8
SAN_CMAKE_BASE = cmake -S . -G Ninja -DCMAKE_BUILD_TYPE=Release \
  $$(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache) $(CMAKE_FLAGS)
SAN_CMAKE = $(SAN_CMAKE_BASE) $(if $(SAN_UNITY_BATCH),-DCMAKE_UNITY_BUILD=ON \
  -DCMAKE_UNITY_BUILD_BATCH_SIZE=$(SAN_UNITY_BATCH))
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
SAN_DIR = $(CURDIR)/tests/sanitizers
ASAN_OPTS = detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=0:suppressions=$(SAN_DIR)/asan.supp
SAN_ENV_REST = LSAN_OPTIONS=suppressions=$(SAN_DIR)/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$(SAN_DIR)/ubsan.supp
ASAN_ENV = ASAN_OPTIONS=$(ASAN_OPTS) $(SAN_ENV_REST)
# The tests' environment: a 16 MiB quarantine of freed memory instead of ASan's 256 MiB, because the
# hardening tests bound the server's RSS growth (+100 MiB under the gRPC stream flood and the
# stalled uploads); 16 MiB still catches a use after free of anything freed since the last ~16 MiB.
ASAN_TEST_ENV = ASAN_OPTIONS=$(ASAN_OPTS):quarantine_size_mb=16 $(SAN_ENV_REST)
# OMP_THREAD_LIMIT=1, not only OMP_NUM_THREADS=1: Session::Run sets omp_set_num_threads(its
# num_threads) and some kernels pass num_threads(...), both of which override OMP_NUM_THREADS; the
# thread limit caps every parallel region at one thread whatever it asks for.
TSAN_ENV = TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(SAN_DIR)/tsan.supp \
  OMP_NUM_THREADS=1 OMP_THREAD_LIMIT=1
# The targets the TSan tests need (not the kernel, optimizer, ... test binaries).
TSAN_TARGETS = inferd_batching_test inferd_serving_test inferd_server_test inferd
TSAN_TESTS = inferd_batching_test inferd_serving_test inferd_server_test
# What the ASan tests need is the CMake target inferd_unit_binaries (every gtest binary, the corpus
# replays, `inferd`; not the benchmarks or the conformance runner; a new library's gtest binary joins
# it by itself). The unit-labelled tests that run no inferd binary (Python over files: the layering
# check, the GGUF writer, the Kubernetes manifests and HPA replay) are left to `make test`.
ASAN_SKIP = ^(layering|gguf_writer|k8s_manifests|k8s_hpa_replay)$$

$(ASAN_BUILD)/build.ninja:
	@scripts/install_deps.sh
	$(SAN_CMAKE) -B $(ASAN_BUILD) -DINFERD_SANITIZE=address,undefined \
	  -DINFERD_SANITIZE_KERNELS=address -DINFERD_SANITIZE_TESTS=address \
	  -DINFERD_SANITIZE_PROTOS=address

$(TSAN_BUILD)/build.ninja:
	@scripts/install_deps.sh
	$(SAN_CMAKE) -B $(TSAN_BUILD) -DINFERD_SANITIZE=thread

asan: $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target inferd_unit_binaries
	cd $(ASAN_BUILD) && $(ASAN_TEST_ENV) ctest --output-on-failure -j $(JOBS) -L 'unit|server' \
	  -LE 'slow|models' -E '$(ASAN_SKIP)'

tsan: $(TSAN_BUILD)/build.ninja
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target $(TSAN_TARGETS)
	@set -e; for t in $(TSAN_TESTS); do echo "tsan: $$t"; $(TSAN_ENV) $(TSAN_BUILD)/$$t --gtest_brief=1; done
	cd $(TSAN_BUILD) && $(TSAN_ENV) ctest --output-on-failure -j 1 -R '^server_e2e$$'

# libFuzzer targets (fuzz/CMakeLists.txt), clang with ASan+UBSan, in their own build dir.
# `make fuzz` builds them; `make fuzz-smoke` (CI) replays each committed corpus (seeds and past
# crash inputs), then fuzzes each target for a fixed number of inputs from a fixed seed
# (FUZZ_SMOKE: target:runs, FUZZ_SEED), starting from the committed corpus alone, with address
# randomization off: the same commit fuzzes the same inputs on every machine (docs/hardening.md
# says how exactly), so CI cannot turn red by chance, and no wall-clock bound makes a slow machine
# test less. The run counts give each target ~10-30 s on one core of
# the 2-core CI machine (docs/hardening.md, "Measured"). New inputs go to
# $(FUZZ_BUILD)/smoke-corpus/<target> (emptied first), never into the committed corpus.
# A long run of one target:
#   $(FUZZ_BUILD)/fuzz/http_codec_fuzz -max_total_time=3600 $(FUZZ_BUILD)/corpus/http_codec fuzz/corpus/http_codec
FUZZ_BUILD ?= build-fuzz
FUZZ_SEED ?= 1
FUZZ_SMOKE ?= http_codec:30000 grpc_codec:50000 openai_codec:60000 model_config:10000 onnx:30000 \
  npy:300000
FUZZ_TARGETS = http_codec grpc_codec openai_codec model_config onnx npy
# Address-space randomization off for the smoke runs: hash tables keyed or seeded by addresses
# (protobuf maps, pointer-keyed containers) otherwise change the coverage from run to run.
NO_ASLR = setarch $(shell uname -m) -R
# 2 GiB RSS per target: a decoder that allocates more on a small input is a finding (oom-*).
FUZZ_FLAGS ?= -rss_limit_mb=2048 -max_len=65536 -timeout=25

# GOOGLE_PROTOBUF_NO_RDTSC: protobuf 3.21 seeds each map's iteration order from the time stamp
# counter, which makes the decoders' coverage, and so the fuzzing path, differ between runs.
$(FUZZ_BUILD)/build.ninja:
	@scripts/install_deps.sh
	CXX=clang++ $(SAN_CMAKE_BASE) -B $(FUZZ_BUILD) -DINFERD_FUZZ=ON \
	  -DINFERD_SANITIZE=address,undefined,fuzzer-no-link -DCMAKE_CXX_FLAGS=-DGOOGLE_PROTOBUF_NO_RDTSC

fuzz: $(FUZZ_BUILD)/build.ninja
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(addsuffix _fuzz,$(FUZZ_TARGETS))

fuzz-smoke: fuzz
	@set -e; for tr in $(FUZZ_SMOKE); do t=$${tr%%:*}; runs=$${tr##*:}; \
	  dir=$(FUZZ_BUILD)/smoke-corpus/$$t; rm -rf $$dir; mkdir -p $$dir; \
	  echo "fuzz-smoke: $$t: replay fuzz/corpus/$$t, then $$runs inputs from seed $(FUZZ_SEED)"; \
	  $(ASAN_ENV) $(FUZZ_BUILD)/fuzz/$${t}_fuzz $(FUZZ_FLAGS) -runs=0 fuzz/corpus/$$t \
	    > $(FUZZ_BUILD)/$$t-replay.log 2>&1 || { cat $(FUZZ_BUILD)/$$t-replay.log; exit 1; }; \
	  start=$$(date +%s); \
	  $(ASAN_ENV) $(NO_ASLR) $(FUZZ_BUILD)/fuzz/$${t}_fuzz $(FUZZ_FLAGS) -seed=$(FUZZ_SEED) \
	    -runs=$$runs -reload=0 -artifact_prefix=$(FUZZ_BUILD)/$$t- $$dir fuzz/corpus/$$t \
	    > $(FUZZ_BUILD)/$$t-smoke.log 2>&1 || { tail -60 $(FUZZ_BUILD)/$$t-smoke.log; exit 1; }; \
	  echo "fuzz-smoke: $$t: $$(grep -E '^#[0-9]+' $(FUZZ_BUILD)/$$t-smoke.log | tail -1) ($$(( $$(date +%s) - start )) s)"; \
	done

# The soak (bench/soak/run_soak.py): capacity, then 70% of it for SOAK_MINUTES with a hot version
# swap every 2 minutes; P99 and RSS per minute in $(BUILD)/soak/soak.{json,md}. Never in `make test`.
SOAK_MINUTES ?= 30
soak: build
	/usr/bin/python3 bench/soak/run_soak.py --inferd $(BUILD)/inferd --work-dir $(BUILD)/soak \
	  --minutes $(SOAK_MINUTES)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)

# The dashboard test (ctest dashboard_e2e: headless Chromium against a server under load) writing
# its screenshot of the page into docs/dashboard.png (docs/fleet.md "Dashboard" shows it).
dashboard-screenshot: build
	/usr/bin/python3 tests/server/dashboard_test.py --inferd $(BUILD)/inferd \
	  --gen-models $(BUILD)/models/gen --work-dir $(BUILD)/dashboard_test \
	  --npm-dir $(BUILD)/dashboard_npm --screenshot docs/dashboard.png
