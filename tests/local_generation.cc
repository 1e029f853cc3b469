#include "tests/local_generation.h"

#include "gtest/gtest.h"
#include "inference/generator.h"
#include "inference/model.h"

namespace ringlm::testing {

std::vector<int32_t> LocalGreedy(const std::string& model_path, const std::string& prompt, int n) {
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Load(model_path, {});
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return {};
  LocalGenerator generator(**model, nullptr);
  GenerateOptions options;
  options.max_tokens = n;
  options.sampling.temperature = 0;
  auto ids = generator.Generate((*model)->tokenizer().Encode(prompt, true, false), options);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

}  // namespace ringlm::testing
