// The paths of this build and this checkout that the tests need: the binaries under test, the
// source tree and the test data.
//
// They are compiled into one small file (build_paths.cpp) rather than passed to every test
// source as -D definitions: a definition that holds an absolute path makes every object that
// sees it differ between two clones, so a second clone would miss ccache on every test file.
// This way only build_paths.cpp is rebuilt in a new clone (docs/performance.md, "Build
// times").
#pragma once

namespace bridge::test {

extern const char* const kBridgeLaunchBin;  // the bridge-launch binary of this build
extern const char* const kBridgeProbeBin;   // the bridge-probe binary of this build
extern const char* const kSourceDir;        // the checkout's root
extern const char* const kTestDataDir;      // tests/data in the checkout
extern const char* const kK8sValidate;      // offline Kubernetes manifest validator (optional)

}  // namespace bridge::test

// The names the tests have always used for these paths.
#define BRIDGE_LAUNCH_BIN ::bridge::test::kBridgeLaunchBin
#define BRIDGE_PROBE_BIN ::bridge::test::kBridgeProbeBin
#define BRIDGE_SOURCE_DIR ::bridge::test::kSourceDir
#define BRIDGE_TEST_DATA ::bridge::test::kTestDataDir
#define BRIDGE_K8S_VALIDATE_DEFAULT ::bridge::test::kK8sValidate
