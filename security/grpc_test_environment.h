// For test binaries that open gRPC channels or servers: shuts the gRPC
// library down synchronously when the tests end, so no handshake or
// connection is still being torn down on gRPC's own threads when the
// process exits (LeakSanitizer would then report its buffers as leaked).
// Include in exactly one file of a test binary. Test-only.
#ifndef RINGLM_SECURITY_GRPC_TEST_ENVIRONMENT_H_
#define RINGLM_SECURITY_GRPC_TEST_ENVIRONMENT_H_

#include <grpc/grpc.h>

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace ringlm::testing_internal {

class GrpcLibraryEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { grpc_init(); }
  // Every channel and server of the tests is gone by now: this drops our
  // reference and waits for the library's cleanup to finish. A connection
  // still closing on a gRPC thread may hold the last reference; it then
  // shuts the library down on a detached thread, which holds the library's
  // init lock throughout, so waiting until grpc_is_initialized() (which takes
  // that lock) says no covers that case too (up to 10 s).
  void TearDown() override {
    grpc_shutdown_blocking();
    for (int i = 0; i < 1000 && grpc_is_initialized() != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
};

inline ::testing::Environment* const kGrpcLibraryEnvironment =
    ::testing::AddGlobalTestEnvironment(new GrpcLibraryEnvironment);

}  // namespace ringlm::testing_internal

#endif  // RINGLM_SECURITY_GRPC_TEST_ENVIRONMENT_H_
