#include "daemon/model_set.h"

#include <gtest/gtest.h>

namespace ringlm {
namespace {

TEST(ParseModelSpecTest, PathAlone) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec("models/a.gguf");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "");
  EXPECT_EQ(spec->path, "models/a.gguf");
}

TEST(ParseModelSpecTest, NameAndPath) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec("qwen3:30b=/m/q.gguf");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "qwen3:30b");
  EXPECT_EQ(spec->path, "/m/q.gguf");
}

TEST(ParseModelSpecTest, EqualsInsideAPathIsThePath) {
  absl::StatusOr<ModelSpec> spec = ParseModelSpec("dir/a=b.gguf");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "");
  EXPECT_EQ(spec->path, "dir/a=b.gguf");
}

TEST(ParseModelSpecTest, BadValuesAreRefused) {
  for (const char* bad : {"", "=a.gguf", "name=", "two words=a.gguf"}) {
    absl::StatusOr<ModelSpec> spec = ParseModelSpec(bad);
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(ParseModelSpec(std::string(129, 'n') + "=a.gguf").ok());
}

TEST(DivideMemoryTest, InProportionToSize) {
  absl::StatusOr<std::vector<MemoryPart>> parts = DivideMemory({100, 300}, {{}, {}});
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].Of(4000).value(), 1000u);
  EXPECT_EQ((*parts)[1].Of(4000).value(), 3000u);
  EXPECT_EQ(DivideMemory({7}, {{}}).value()[0].Of(123).value(), 123u);
}

TEST(DivideMemoryTest, FixedAmountsFirstTheRestBySize) {
  absl::StatusOr<std::vector<MemoryPart>> parts = DivideMemory({100, 300, 100}, {{}, 1000, {}});
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ((*parts)[0].Of(5000).value(), 2000u);
  EXPECT_EQ((*parts)[1].Of(5000).value(), 1000u);
  EXPECT_EQ((*parts)[2].Of(5000).value(), 2000u);
  // More fixed than there is: a clear error, whichever part asks.
  absl::StatusOr<uint64_t> over = (*parts)[1].Of(999);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(over.status().message().find("--model-memory"), std::string::npos);
  // Fixed amounts that leave nothing for the others.
  EXPECT_FALSE((*parts)[0].Of(1000).ok());
}

TEST(DivideMemoryTest, BadInputIsRefused) {
  EXPECT_FALSE(DivideMemory({}, {}).ok());
  EXPECT_FALSE(DivideMemory({10, 0}, {{}, {}}).ok());
  EXPECT_FALSE(DivideMemory({10}, {uint64_t{0}}).ok());
  EXPECT_FALSE(DivideMemory({10}, {}).ok());
}

}  // namespace
}  // namespace ringlm
