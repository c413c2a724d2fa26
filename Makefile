# bridge-launch: the two Quick-start commands (`make demo`, `make test`) and helpers.
# Everything installs what it needs first (scripts/install-deps.sh is a no-op when done).

BUILD_DIR ?= build
JOBS ?= 2
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRIDGE_WERROR=ON
DEMO_RECIPE ?= examples/recipes/demo.yaml

.PHONY: all deps build demo test unit integration lint format format-check tidy bench clean
.PHONY: test-sanitize fuzz

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) $(CMAKE_FLAGS)

build: deps $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j$(JOBS)

# Only what the demo runs (bridge-launch and bridge-probe): a newcomer's first command does not
# wait for the test suites and the benchmarks (docs/performance.md, "Build times").
demo: deps $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j$(JOBS) --target bridge-launch bridge-probe
	./$(BUILD_DIR)/bridge-launch $(DEMO_RECIPE)

# All suites: format check, unit, conformance, integration (local, Slurm test cluster,
# Kubernetes control plane), sanitizers, fuzz, package, clang-tidy. The one-time caches start
# in the background first (scripts/prefetch-caches.sh), so that on a new machine they overlap
# the build.
test: deps
	@bash scripts/prefetch-caches.sh
	@$(MAKE) --no-print-directory build
	@BUILD_DIR=$(BUILD_DIR) bash scripts/run-tests.sh

unit: build
	cd $(BUILD_DIR) && ctest -L unit -j$(JOBS) --output-on-failure

integration: build
	@BUILD_DIR=$(BUILD_DIR) SUITES=integration bash scripts/run-tests.sh

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

format-check: deps
	@BUILD_DIR=$(BUILD_DIR) SUITES=format bash scripts/run-tests.sh

tidy: build
	@BUILD_DIR=$(BUILD_DIR) SUITES=tidy bash scripts/run-tests.sh

bench: build
	./$(BUILD_DIR)/bench/bridge_bench

clean:
	rm -rf $(BUILD_DIR)

# Reliability (docs/reliability.md). One clang build dir serves both suites (a third full
# build would not fit the CI budget on 2 cores): every target is built by clang 14 with
# -Werror, ASan + UBSan (-fno-sanitize-recover=all) and libFuzzer coverage.
# test-sanitize: the unit suite there (CLI tests and the bad-input corpus of tests/data/bad/
# included), leak detection on. fuzz: the libFuzzer targets of tests/fuzz, each run for
# FUZZ_SECONDS with -max_total_time; fails on any crash, leak or sanitizer report.
CLANG_BUILD_DIR ?= build-clang
ASAN_BUILD_DIR ?= $(CLANG_BUILD_DIR)
FUZZ_BUILD_DIR ?= $(CLANG_BUILD_DIR)
FUZZ_SECONDS ?= 30
FUZZ_TARGETS ?= fuzz_recipe_loader fuzz_override fuzz_shell_quote fuzz_plan_render fuzz_slurm_template fuzz_scheduler_output fuzz_registry_entry fuzz_plan_verdict fuzz_slurm_attempts fuzz_include_glob
CLANG_CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo \
                     -DBRIDGE_SANITIZE=ON -DBRIDGE_FUZZ=ON -DBRIDGE_WERROR=ON \
                     -DBRIDGE_BUILD_BENCH=OFF

$(CLANG_BUILD_DIR)/CMakeCache.txt:
	CC=clang CXX=clang++ cmake -S . -B $(CLANG_BUILD_DIR) $(CLANG_CMAKE_FLAGS)

# Only what the unit suite runs: the integration test binaries are not built a second time.
test-sanitize: deps $(CLANG_BUILD_DIR)/CMakeCache.txt
	cmake --build $(ASAN_BUILD_DIR) -j$(JOBS) --target bridge-launch bridge-probe unit_tests
	cd $(ASAN_BUILD_DIR) && ASAN_OPTIONS=detect_leaks=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest -L unit -j$(JOBS) --output-on-failure

fuzz: deps $(CLANG_BUILD_DIR)/CMakeCache.txt
	cmake --build $(FUZZ_BUILD_DIR) -j$(JOBS) --target bridge_fuzzers
	FUZZ_BUILD_DIR=$(FUZZ_BUILD_DIR) FUZZ_SECONDS=$(FUZZ_SECONDS) \
	  bash tests/fuzz/run-fuzzers.sh $(FUZZ_TARGETS)
