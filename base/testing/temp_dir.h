// Temporary directories for tests that clean up after a passing run.
#ifndef RINGLM_BASE_TESTING_TEMP_DIR_H_
#define RINGLM_BASE_TESTING_TEMP_DIR_H_

#include <string>

namespace ringlm::testing {

// Creates a fresh directory `<gtest TempDir>/<prefix>-XXXXXX` and returns its
// path ("" if it could not be made; the failure is also added to the running
// test). Every directory made this way is removed, with all it holds, when the
// test program exits after all its tests passed; after a failure they stay for
// the logs, and their paths are printed. ctest runs each test case in its own
// process, so there the cleanup follows each test. Thread-safe.
std::string MakeTempDir(const std::string& prefix);

}  // namespace ringlm::testing

#endif  // RINGLM_BASE_TESTING_TEMP_DIR_H_
