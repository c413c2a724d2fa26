// The example recipes the benchmarks read. Compiled into bench_paths.cpp alone, not passed to
// every bench source as a -D definition, so that no bench object holds a path of this clone
// and a second clone hits ccache on them (tests/support/build_paths.h has the same reason).
#pragma once

namespace bridge::bench {
extern const char* const kExamplesDir;  // examples/recipes in the checkout
}  // namespace bridge::bench

#define BRIDGE_EXAMPLES ::bridge::bench::kExamplesDir
