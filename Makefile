# bridge-launch: the two Quick-start commands (`make demo`, `make test`) and helpers.
# Everything installs what it needs first (scripts/install-deps.sh is a no-op when done).

BUILD_DIR ?= build
JOBS ?= 2
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBRIDGE_WERROR=ON \
               -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
DEMO_RECIPE ?= examples/recipes/demo.yaml

.PHONY: all deps build demo test unit integration lint format format-check tidy bench clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) $(CMAKE_FLAGS)

build: deps $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j$(JOBS)

demo: build
	./$(BUILD_DIR)/bridge-launch $(DEMO_RECIPE)

# All suites: format check, unit, integration (local + Slurm test cluster), clang-tidy.
test: build
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
