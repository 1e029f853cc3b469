// The single-process reference that cluster tests compare against.
#ifndef RINGLM_TESTS_LOCAL_GENERATION_H_
#define RINGLM_TESTS_LOCAL_GENERATION_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ringlm::testing {

// Greedy ids for `prompt` (with BOS) from the model at `model_path`, all
// layers in this process; empty, with a test failure, when it cannot run.
std::vector<int32_t> LocalGreedy(const std::string& model_path, const std::string& prompt, int n);

}  // namespace ringlm::testing

#endif  // RINGLM_TESTS_LOCAL_GENERATION_H_
