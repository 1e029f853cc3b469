#include "model_store/internal/test_model.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "gguf/gguf_writer.h"
#include "gtest/gtest.h"

namespace ringlm::model_store_test {
namespace {

// n floats of a cheap deterministic sequence (xorshift), never all zero.
std::string Floats(uint64_t n, uint32_t seed) {
  std::string bytes(n * 4, '\0');
  uint32_t x = seed * 2654435761u + 12345;
  for (uint64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    const float f = static_cast<float>(x % 20001) / 10000.0f - 1.0f;
    std::memcpy(bytes.data() + i * 4, &f, 4);
  }
  return bytes;
}

TestModel Finish(const GgufWriter& w, const std::string& path) {
  TestModel m;
  m.path = path;
  const absl::Status s = w.WriteFile(path);
  if (!s.ok()) ADD_FAILURE() << s;
  m.bytes = ReadWholeFile(path);
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(path);
  if (!f.ok()) {
    ADD_FAILURE() << f.status();
    std::abort();
  }
  m.file = *std::move(f);
  return m;
}

void Add(GgufWriter* w, const std::string& name, std::vector<uint64_t> dims, uint32_t seed) {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  const absl::Status s = w->AddTensor(name, std::move(dims), TensorType::kF32, Floats(n, seed));
  if (!s.ok()) ADD_FAILURE() << s;
}

}  // namespace

TestModel WriteTestModel(const std::string& path, uint32_t seed) {
  GgufWriter w;
  w.SetString("general.architecture", "test");
  w.SetUint32("test.block_count", 1);
  Add(&w, "blk.0.big", {1024, 2304}, seed);      // 9 MiB
  Add(&w, "blk.0.mid", {1024, 1100}, seed + 1);  // 4.3 MiB
  Add(&w, "small.a", {64}, seed + 2);
  Add(&w, "small.b", {32, 3}, seed + 3);
  Add(&w, "small.c", {100}, seed + 4);
  return Finish(w, path);
}

TestModel WriteOtherModel(const std::string& path) {
  GgufWriter w;
  w.SetString("general.architecture", "other");
  Add(&w, "only.one", {256}, 7);
  Add(&w, "only.two", {128}, 8);
  return Finish(w, path);
}

std::string MakeScratchDir() {
  std::string tmpl = ::testing::TempDir() + "/model_store_XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
    std::abort();
  }
  return tmpl;
}

void RemoveScratchDir(const std::string& dir) {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_directory(ec)) ::chmod(it->path().c_str(), 0755);
  }
  ::chmod(dir.c_str(), 0755);
  std::filesystem::remove_all(dir, ec);
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace ringlm::model_store_test
