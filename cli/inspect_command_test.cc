// `ringlm inspect` on the bundled models.
#include <cstdio>

#include "cli/commands.h"
#include "cli/synth/synth_model.h"
#include "cli/test_commands.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using testing::CommandResult;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::RunCommand;
using ::testing::StartsWith;

TEST(InspectCommandTest, HelpNamesThePath) {
  CommandResult r = RunCommand(RunInspect, {"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("ringlm inspect PATH"));
  EXPECT_THAT(r.out, HasSubstr("GGUF model file"));
}

TEST(InspectCommandTest, ShowsTheArchitectureLayersAndTensors) {
  const std::string model = testing::StoriesModel();
  CommandResult r = RunCommand(RunInspect, {model});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, IsEmpty());
  EXPECT_THAT(r.out, StartsWith("file: " + model + "\nGGUF version 3, "));
  EXPECT_THAT(r.out, ContainsRegex("\n  general.architecture +\"llama\"\n"));
  EXPECT_THAT(r.out, ContainsRegex("\n  llama.block_count +5\n"));
  EXPECT_THAT(r.out, ContainsRegex("\n  tokenizer.ggml.tokens +\\[512 x string\\] \\[\"<unk>\", "
                                   "\"<s>\", \"</s>\", .*, \\.\\.\\.\\]\n"));
  EXPECT_THAT(r.out, ContainsRegex("\n  blk.0.attn_q.weight +f32 +\\[64, 64\\] 16384 bytes\n"));
  EXPECT_THAT(r.out, HasSubstr("\nparameters: 292800 (f32 292800)\n"));
  EXPECT_THAT(r.out, HasSubstr("\nmodel: llama, 5 layers, n_embd 64, n_ff 172, heads 8 (kv 4), "
                               "head_dim 8, vocab 512, context 128\n"));
  // Five layers of the same tensors, all f32.
  EXPECT_THAT(r.out, ContainsRegex("\nbytes per layer: layers 0-4: [0-9.]+ MiB each\n"));
  EXPECT_THAT(r.out, ContainsRegex("\nembedding [0-9.]+ MiB, output head [0-9.]+ MiB, total "));
  EXPECT_THAT(r.out, HasSubstr("\nKV cache per token: "));
}

TEST(InspectCommandTest, CountsParametersByType) {
  CommandResult r = RunCommand(RunInspect, {testing::StoriesModel("q8_0")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // ffn_down stays f16 (172 columns are no multiple of 32); norms f32.
  EXPECT_THAT(r.out,
              ContainsRegex("\nparameters: 292800 \\(f16 [0-9]+, f32 [0-9]+, q8_0 [0-9]+\\)\n"));
  EXPECT_THAT(r.out, ContainsRegex("\n  blk.0.attn_q.weight +q8_0 +\\[64, 64\\] 4352 bytes\n"));
  EXPECT_THAT(r.out, ContainsRegex("\n  blk.0.ffn_down.weight +f16 "));
}

TEST(InspectCommandTest, ShowsTheExpertsOfAMixtureOfExperts) {
  const std::string path = ::testing::TempDir() + "/inspect_qwen2moe.gguf";
  SynthOptions options;
  options.preset = "qwen2moe-tiny";
  options.type = TensorType::kQ8_0;
  options.threads = 1;
  ASSERT_TRUE(WriteSynthModel(options, path).ok());
  CommandResult r = RunCommand(RunInspect, {path});
  std::remove(path.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\nmodel: qwen2moe, 4 layers, "));
  EXPECT_THAT(r.out,
              HasSubstr("\nexperts: 12, 4 used per token, width 128, shared expert width 512\n"));
  EXPECT_THAT(r.out, ContainsRegex("\nbytes per layer: layers 0-3: [0-9.]+ MiB each\n"));
}

TEST(InspectCommandTest, FailsOnAFileThatIsNotGguf) {
  CommandResult r = RunCommand(RunInspect, {std::string(RINGLM_SHARED_DIR) + "/models/tok512.bin"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("ringlm: DATA_LOSS: "));
  EXPECT_THAT(r.err, HasSubstr("bad magic"));
  EXPECT_THAT(r.out, IsEmpty());
}

TEST(InspectCommandTest, FailsWithoutAPath) {
  CommandResult none = RunCommand(RunInspect, {});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.err, "ringlm: missing argument PATH (see --help)\n");
  CommandResult missing = RunCommand(RunInspect, {"/nonexistent.gguf"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("NOT_FOUND"));
}

}  // namespace
}  // namespace ringlm
