// `ringlm synth` on the smallest preset: the file it writes opens as GGUF
// with the weight type asked for.
#include <fstream>
#include <sstream>

#include "base/testing/temp_dir.h"
#include "cli/commands.h"
#include "cli/test_commands.h"
#include "gguf/gguf_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using testing::CommandResult;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::RunCommand;
using ::testing::StartsWith;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(SynthCommandTest, HelpListsTheFlagsAndPresets) {
  CommandResult r = RunCommand(RunSynth, {"--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* s : {"--preset", "--type", "--tokenizer", "--out", "--seed", "--threads",
                        "micro", "tinyllama-1.1b", "q8_0"}) {
    EXPECT_THAT(r.out, HasSubstr(s));
  }
}

TEST(SynthCommandTest, BadArgumentsFailWithAMessage) {
  const std::string out = testing::MakeTempDir("synth") + "/m.gguf";
  CommandResult no_out = RunCommand(RunSynth, {"--preset", "micro", "--type", "f16"});
  EXPECT_EQ(no_out.exit_code, 1);
  EXPECT_EQ(no_out.err, "ringlm: INVALID_ARGUMENT: --out is required\n");
  CommandResult no_type = RunCommand(RunSynth, {"--preset", "micro", "--out", out});
  EXPECT_EQ(no_type.exit_code, 1);
  EXPECT_EQ(no_type.err, "ringlm: INVALID_ARGUMENT: --type is required\n");
  CommandResult preset = RunCommand(RunSynth, {"--preset", "nope", "--type", "f16", "--out", out});
  EXPECT_EQ(preset.exit_code, 1);
  EXPECT_THAT(preset.err, HasSubstr("unknown preset 'nope' (known: tiny, "));
  CommandResult type = RunCommand(RunSynth, {"--preset", "micro", "--type", "f64", "--out", out});
  EXPECT_EQ(type.exit_code, 1);
  EXPECT_THAT(type.err, HasSubstr("unknown type 'f64'"));
  EXPECT_FALSE(std::ifstream(out).good());  // nothing written
}

struct TypeCase {
  const char* name;
  TensorType weights;  // every 2-D tensor
  uint64_t file_type;  // general.file_type
};

class SynthTypeTest : public ::testing::TestWithParam<TypeCase> {};

TEST_P(SynthTypeTest, WritesAGgufOfTheTypeAsked) {
  const TypeCase& c = GetParam();
  const std::string out = testing::MakeTempDir("synth") + "/micro.gguf";
  CommandResult r = RunCommand(
      RunSynth, {"--preset", "micro", "--type", c.name, "--out", out, "--seed", "7", "-t", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("wrote " + out + ": "));
  EXPECT_THAT(r.out, HasSubstr(std::string(" parameters (")));
  EXPECT_THAT(r.out, HasSubstr(std::string(", ") + c.name + ", seed 7, "));
  EXPECT_THAT(r.err, StartsWith("ringlm: writing " + out + " (micro, " + c.name + ", about "));

  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(out);
  ASSERT_TRUE(file.ok()) << file.status();
  const GgufValue* arch = (*file)->Find("general.architecture");
  ASSERT_NE(arch, nullptr);
  EXPECT_EQ(arch->AsString(), "llama");
  const GgufValue* file_type = (*file)->Find("general.file_type");
  ASSERT_NE(file_type, nullptr);
  EXPECT_EQ(file_type->AsUint64(), c.file_type);
  int matrices = 0;
  for (const GgufTensorInfo& t : (*file)->tensors()) {
    SCOPED_TRACE(t.name);
    if (t.dims.size() == 2) {
      ++matrices;
      EXPECT_EQ(t.type, c.weights);
    } else {
      EXPECT_EQ(t.type, TensorType::kF32);  // norms
    }
  }
  EXPECT_GE(matrices, 8);  // embedding and one layer's 7 matrices
}

INSTANTIATE_TEST_SUITE_P(Types, SynthTypeTest,
                         ::testing::Values(TypeCase{"f16", TensorType::kF16, 1},
                                           TypeCase{"q8_0", TensorType::kQ8_0, 7}),
                         [](const ::testing::TestParamInfo<TypeCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(SynthCommandTest, TheSameSeedGivesTheSameBytes) {
  const std::string dir = testing::MakeTempDir("synth");
  for (const char* name : {"a.gguf", "b.gguf"}) {
    ASSERT_EQ(RunCommand(RunSynth, {"--preset", "micro", "--type", "q8_0", "--seed", "3", "-o",
                                    dir + "/" + name})
                  .exit_code,
              0);
  }
  ASSERT_EQ(RunCommand(RunSynth, {"--preset", "micro", "--type", "q8_0", "--seed", "4", "-o",
                                  dir + "/c.gguf"})
                .exit_code,
            0);
  const std::string a = ReadFile(dir + "/a.gguf");
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, ReadFile(dir + "/b.gguf"));
  EXPECT_NE(a, ReadFile(dir + "/c.gguf"));
}

}  // namespace
}  // namespace ringlm
