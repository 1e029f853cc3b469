// The built `ringlm synth` and `ringlm bench` on a tiny model: exit status
// and the shape of their output (never the speed).
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ringlm {
namespace {

const std::string kBinary = std::string(RINGLM_BINARY_DIR) + "/cli/ringlm";

struct CommandRun {
  int status = -1;
  std::string out;  // stdout
};

// Runs `kBinary args` with stderr sent to /dev/null.
CommandRun RunRinglm(const std::string& args) {
  CommandRun r;
  FILE* f = ::popen((kBinary + " " + args + " 2>/dev/null").c_str(), "r");
  if (f == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) r.out.append(buf, n);
  const int st = ::pclose(f);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class SynthCliTest : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ =
        new std::string(testing::TempDir() + "/synth_cli_" + std::to_string(::getpid()) + ".gguf");
  }
  static void TearDownTestSuite() {
    ::unlink(path_->c_str());
    delete path_;
  }
  static std::string* path_;
};
std::string* SynthCliTest::path_ = nullptr;

TEST_F(SynthCliTest, SynthThenBench) {
  CommandRun synth = RunRinglm("synth --preset tiny --type q8_0 --seed 3 --out " + *path_);
  ASSERT_EQ(synth.status, 0) << synth.out;
  EXPECT_NE(synth.out.find("wrote " + *path_), std::string::npos) << synth.out;
  EXPECT_NE(synth.out.find("parameters"), std::string::npos) << synth.out;
  ASSERT_TRUE(std::ifstream(*path_).good());

  CommandRun json = RunRinglm("bench -m " + *path_ + " -p 8 -n 4 -r 1 -t 2 --json");
  ASSERT_EQ(json.status, 0) << json.out;
  nlohmann::json j = nlohmann::json::parse(json.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << json.out;
  EXPECT_EQ(j["model"], "synth-tiny");
  EXPECT_EQ(j["type"], "Q8_0");
  EXPECT_EQ(j["threads"], 2);
  EXPECT_GT(j["params"].get<uint64_t>(), 1000000u);
  ASSERT_EQ(j["tests"].size(), 2u);
  EXPECT_EQ(j["tests"][0]["test"], "pp8");
  EXPECT_EQ(j["tests"][0]["n_prompt"], 8);
  EXPECT_EQ(j["tests"][1]["test"], "tg4");
  EXPECT_EQ(j["tests"][1]["n_gen"], 4);
  for (const auto& t : j["tests"]) {
    ASSERT_EQ(t["samples_ts"].size(), 1u);
    EXPECT_GT(t["avg_ts"].get<double>(), 0.0);
    EXPECT_EQ(t["stddev_ts"].get<double>(), 0.0);  // one sample
  }

  CommandRun table = RunRinglm("bench --model " + *path_ + " -p 8 -n 4 -r 2 -t 1");
  ASSERT_EQ(table.status, 0) << table.out;
  EXPECT_NE(table.out.find("| model"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("t/s"), std::string::npos);
  EXPECT_NE(table.out.find("| synth-tiny"), std::string::npos);
  EXPECT_NE(table.out.find("pp8 |"), std::string::npos);
  EXPECT_NE(table.out.find("tg4 |"), std::string::npos);
  EXPECT_NE(table.out.find(" ± "), std::string::npos);
  EXPECT_NE(table.out.find("MiB"), std::string::npos);
}

TEST_F(SynthCliTest, BadArgumentsFail) {
  EXPECT_NE(RunRinglm("synth --preset nope --type q8_0 --out " + *path_ + ".x").status, 0);
  EXPECT_NE(RunRinglm("synth --preset tiny --type iq2_xxs --out " + *path_ + ".x").status, 0);
  EXPECT_NE(RunRinglm("synth --preset tiny --type q8_0").status, 0);
  EXPECT_FALSE(std::ifstream(*path_ + ".x").good());
  EXPECT_NE(RunRinglm("bench -p 8").status, 0);
  EXPECT_NE(RunRinglm("bench -m /nonexistent.gguf").status, 0);
  CommandRun help = RunRinglm("synth --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("--preset"), std::string::npos);
  EXPECT_NE(help.out.find("--tokenizer"), std::string::npos);
}

// A hand-made SentencePiece-style tokenizer.json: `ringlm synth --tokenizer`
// writes its vocabulary, `ringlm tokenize` then uses it. Missing files fail.
TEST_F(SynthCliTest, TokenizerDirectoryGivesTheModelItsVocabulary) {
  const std::string dir = *path_ + ".hf";
  ::mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/tokenizer.json") << R"({
    "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
              "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "\u2581": 3, "h": 4, "i": 5,
                        "hi": 6, "\u2581hi": 7},
              "merges": [["h", "i"], ["\u2581", "hi"]]},
    "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
    "added_tokens": [{"id": 1, "content": "<s>", "special": true},
                     {"id": 2, "content": "</s>", "special": true}]})";
  CommandRun missing = RunRinglm("synth --tokenizer " + dir + " --out " + dir + "/m.gguf");
  EXPECT_NE(missing.status, 0);  // no tokenizer_config.json
  std::ofstream(dir + "/tokenizer_config.json")
      << R"({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": true})";
  CommandRun synth = RunRinglm("synth --tokenizer " + dir + " --out " + dir + "/m.gguf");
  ASSERT_EQ(synth.status, 0) << synth.out;
  EXPECT_NE(synth.out.find("wrote " + dir + "/m.gguf"), std::string::npos) << synth.out;
  CommandRun tok = RunRinglm("tokenize --model " + dir + "/m.gguf --text 'hi hi' --json");
  ASSERT_EQ(tok.status, 0) << tok.out;
  EXPECT_EQ(tok.out, "{\"ids\":[1,7,7]}\n");
  for (const char* f : {"/tokenizer.json", "/tokenizer_config.json", "/m.gguf"}) {
    ::unlink((dir + f).c_str());
  }
  ::rmdir(dir.c_str());
}

}  // namespace
}  // namespace ringlm
