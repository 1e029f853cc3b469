// The `ringlm` binary as a user runs it: exit codes, --json output and
// error messages.
#include <sys/stat.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ringlm {
namespace {

using nlohmann::json;

const std::string kShared = RINGLM_SHARED_DIR;
const std::string kBinary = std::string(RINGLM_BINARY_DIR) + "/cli/ringlm";

struct RunResult {
  int exit_code = -1;
  std::string out;  // stdout and stderr together
};

RunResult RunCli(const std::string& args) {
  RunResult r;
  FILE* pipe = popen((kBinary + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

TEST(CliTest, GenerateJsonReproducesTheReferenceIds) {
  std::ifstream in(kShared + "/refs/stories260k_llamacpp.json");
  const json refs = json::parse(in);
  for (const char* variant : {"f32", "q8_0"}) {
    const std::string model = kShared + "/models/stories260K-" + variant + ".gguf";
    for (const json& g : refs["generation"]) {
      SCOPED_TRACE(std::string(variant) + " prompt '" + g["prompt"].get<std::string>() + "'");
      RunResult r = RunCli("generate --model " + model + " --prompt " +
                           Quote(g["prompt"].get<std::string>()) + " --temp 0 -n 64 --json");
      ASSERT_EQ(r.exit_code, 0) << r.out;
      const json out = json::parse(r.out);
      EXPECT_EQ(out["prompt_ids"], g["prompt_ids"]);
      EXPECT_EQ(out["ids"], g[variant]["generated_ids"]);
      EXPECT_EQ(out["text"], g[variant]["generated_text"]);
    }
  }
}

TEST(CliTest, TokenizeJsonMatchesTheReference) {
  RunResult r = RunCli("tokenize --model " + kShared + "/models/stories260K-f32.gguf" +
                       " --text 'Hello world' --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(json::parse(r.out)["ids"], json::parse("[1, 346, 306, 414, 263, 304, 341]"));
}

TEST(CliTest, InspectShowsShapesAndSizes) {
  RunResult r = RunCli("inspect " + kShared + "/models/stories260K-q8_0.gguf");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* s : {"llama.block_count", "blk.0.attn_q.weight", "q8_0", "parameters: 292800",
                        "bytes per layer"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
}

TEST(CliTest, BenchMeasuresEachTestAtTheDepthAsked) {
  RunResult r = RunCli("bench --model " + kShared + "/models/stories260K-q8_0.gguf" +
                       " -p 8 -n 4 -d 40 -r 2 -t 1 --json --cpu-target scalar");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["cpu_target"], "scalar");
  ASSERT_EQ(out["tests"].size(), 2u) << r.out;
  EXPECT_EQ(out["tests"][0]["test"], "pp8 @ d40");
  EXPECT_EQ(out["tests"][1]["test"], "tg4 @ d40");
  for (const json& t : out["tests"]) {
    EXPECT_EQ(t["n_depth"], 40);
    EXPECT_EQ(t["samples_ts"].size(), 2u);
    EXPECT_GT(t["avg_ts"].get<double>(), 0);
  }
  EXPECT_NE(RunCli("bench --model /nonexistent.gguf -d -1").exit_code, 0);
  const RunResult bad = RunCli("bench --model " + kShared + "/models/stories260K-q8_0.gguf" +
                               " -p 8 -n 0 --cpu-target avx3");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("unknown CPU target \"avx3\""), std::string::npos) << bad.out;
}

TEST(CliTest, ErrorsGoToStderrWithANonZeroExit) {
  RunResult missing = RunCli("generate --model /nonexistent.gguf --prompt hi");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.out.find("/nonexistent.gguf"), std::string::npos) << missing.out;
  RunResult bad_flag = RunCli("generate --bogus");
  EXPECT_EQ(bad_flag.exit_code, 2);
  EXPECT_NE(bad_flag.out.find("unknown option --bogus"), std::string::npos);
  RunResult not_gguf = RunCli("inspect " + kShared + "/models/tok512.bin");
  EXPECT_NE(not_gguf.exit_code, 0);
  RunResult help = RunCli("generate --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--temp"), std::string::npos);
}

TEST(CliTest, FlagsReferenceIsCurrent) {
  const std::string source = RINGLM_SOURCE_DIR;
  std::ifstream in(source + "/docs/flags.md");
  std::stringstream committed;
  committed << in.rdbuf();
  FILE* pipe = popen((source + "/deploy/gen-flags-reference.sh " + RINGLM_BINARY_DIR).c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string generated;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) generated.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0);
  EXPECT_EQ(generated, committed.str())
      << "docs/flags.md is stale: run deploy/gen-flags-reference.sh > docs/flags.md";
}

TEST(CliTest, KeygenWritesAPrivateKeyAndJoinCommandInstallsIt) {
  const std::string dir = testing::MakeTempDir("ringlm-keygen");
  const std::string key = dir + "/cluster.key";
  RunResult made = RunCli("keygen --out " + Quote(key));
  ASSERT_EQ(made.exit_code, 0) << made.out;
  struct stat st {};
  ASSERT_EQ(stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  RunResult again = RunCli("keygen --out " + Quote(key));
  EXPECT_NE(again.exit_code, 0) << "keygen must not overwrite a key without --force";

  const std::string joined = dir + "/other machine/cluster.key";
  RunResult join = RunCli("join-command --cluster-key " + Quote(key) + " --model /m.gguf" +
                          " --key-path " + Quote(joined));
  ASSERT_EQ(join.exit_code, 0) << join.out;
  const size_t start = join.out.find(" && ringlmd --model '/m.gguf' --cluster-key ");
  ASSERT_NE(start, std::string::npos) << join.out;
  // Run the installing half of the line, as the joining machine would.
  const std::string install = join.out.substr(0, start);
  ASSERT_EQ(system(("bash -c " + Quote(install)).c_str()), 0) << install;
  std::ifstream a(key), b(joined);
  std::stringstream sa, sb;
  sa << a.rdbuf();
  sb << b.rdbuf();
  EXPECT_EQ(sa.str(), sb.str());
  ASSERT_EQ(stat(joined.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

}  // namespace
}  // namespace ringlm
