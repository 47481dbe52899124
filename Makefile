# inferd: the two set-up commands are `make run` and `make test`; both install what they need.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test unit thread-safety conformance run clean gen-models gen-models-large

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
GEN_SMALL = test-llama test-gpt2 tiny-llama
GEN_LARGE = llama-110m gpt2-110m llama-350m
gen-models: deps
	@for m in $(GEN_SMALL); do [ -f $(GEN_MODELS)/$$m/config.json ] || { \
	  /usr/bin/python3 scripts/generation/build_models.py --out $(GEN_MODELS); exit $$?; }; done

gen-models-large: deps
	@for m in $(GEN_LARGE); do [ -f $(GEN_MODELS)/$$m/config.json ] || { \
	  /usr/bin/python3 scripts/generation/build_models.py --out $(GEN_MODELS) --large; exit $$?; }; done

clean:
	rm -rf $(BUILD)
