// Definitions for build_paths.h; the BRIDGE_*_PATH values come from tests/CMakeLists.txt.
#include "tests/support/build_paths.h"

namespace bridge::test {

const char* const kBridgeLaunchBin = BRIDGE_LAUNCH_BIN_PATH;
const char* const kBridgeProbeBin = BRIDGE_PROBE_BIN_PATH;
const char* const kSourceDir = BRIDGE_SOURCE_DIR_PATH;
const char* const kTestDataDir = BRIDGE_TEST_DATA_PATH;
const char* const kK8sValidate = BRIDGE_K8S_VALIDATE_PATH;

}  // namespace bridge::test
