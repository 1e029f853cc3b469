#include "daemon/models_file.h"

#include <gtest/gtest.h>

namespace ringlm {
namespace {

TEST(ModelsFileTest, LinesCommentsNamesAndMemory) {
  absl::StatusOr<std::vector<ModelsFileEntry>> entries = ParseModelsFile(
      "# the models\n\n/m/small.gguf\n  coder=/m/coder-q4.gguf   memory_mb=6000 \n", "f");
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_EQ((*entries)[0].name, "small");
  EXPECT_EQ((*entries)[0].path, "/m/small.gguf");
  EXPECT_EQ((*entries)[0].memory_bytes, 0u);
  EXPECT_EQ((*entries)[1].name, "coder");
  EXPECT_EQ((*entries)[1].path, "/m/coder-q4.gguf");
  EXPECT_EQ((*entries)[1].memory_bytes, uint64_t{6000} << 20);
}

TEST(ModelsFileTest, BadLinesNameTheLine) {
  for (const char* text :
       {"a=/x.gguf memory=3\n", "/x.gguf memory_mb=0\n", "a=/x.gguf memory_mb=1 extra\n",
        "=x.gguf\n", "a=/x.gguf\na=/y.gguf\n"}) {
    absl::StatusOr<std::vector<ModelsFileEntry>> entries = ParseModelsFile(text, "models.txt");
    ASSERT_FALSE(entries.ok()) << text;
    EXPECT_EQ(entries.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(entries.status().message().rfind("models.txt:", 0), 0u) << entries.status();
  }
  EXPECT_NE(ParseModelsFile("x\n\nb=/y.gguf memory_mb=x\n", "f").status().message().find("f:3:"),
            std::string::npos);
}

TEST(ModelsFileTest, AMissingFileIsNotFound) {
  EXPECT_EQ(ReadModelsFile("/nonexistent/models.txt").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ringlm
