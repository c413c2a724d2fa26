// Definition for bench_paths.h; BRIDGE_EXAMPLES_PATH comes from bench/CMakeLists.txt.
#include "bench/bench_paths.h"

namespace bridge::bench {
const char* const kExamplesDir = BRIDGE_EXAMPLES_PATH;
}  // namespace bridge::bench
