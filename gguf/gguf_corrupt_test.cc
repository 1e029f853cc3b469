// Malformed GGUF files: each defect gives a precise error, and corrupted
// copies of the bundled models never crash the parser.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using ::testing::HasSubstr;

const std::string kModels = std::string(RINGLM_SHARED_DIR) + "/models/";

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void PutLe(std::string* b, size_t pos, uint64_t v, int n) {
  ASSERT_LE(pos + n, b->size());
  for (int i = 0; i < n; ++i) (*b)[pos + i] = static_cast<char>(v >> (8 * i));
}

// Offset just past the first occurrence of `needle`.
size_t After(const std::string& b, std::string_view needle) {
  const size_t p = b.find(needle);
  if (p == std::string::npos) {
    ADD_FAILURE() << "'" << needle << "' not found";
    return b.size();  // patches there fail their bounds check
  }
  return p + needle.size();
}

// A small valid file; "t.one" is [8, 2] F32 at offset 0, "t.two" [64] at 64.
GgufWriter BaseWriter() {
  GgufWriter w;
  w.SetString("general.architecture", "test");
  w.SetUint32("k.one", 1);
  w.SetUint32("k.two", 2);
  w.SetStringArray("k.strs", {"alpha", "beta"});
  EXPECT_TRUE(w.AddTensor("t.one", {8, 2}, TensorType::kF32, std::string(64, '\x11')).ok());
  EXPECT_TRUE(w.AddTensor("t.two", {64}, TensorType::kF32, std::string(256, '\x22')).ok());
  return w;
}

std::string Base() { return BaseWriter().ToBytes(); }

void ExpectError(std::string bytes, absl::StatusCode code, std::string_view text) {
  auto f = GgufFile::FromBytes(std::move(bytes));
  ASSERT_FALSE(f.ok()) << "parsed, expected: " << text;
  EXPECT_EQ(f.status().code(), code) << f.status();
  EXPECT_THAT(std::string(f.status().message()), HasSubstr(std::string(text)));
}

TEST(GgufCorruptTest, BaseFileIsValid) {
  auto f = GgufFile::FromBytes(Base());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->tensors()[1].offset, 64u);
}

TEST(GgufCorruptTest, HeaderDefects) {
  ExpectError("", absl::StatusCode::kDataLoss, "truncated at offset 0 while reading magic");
  ExpectError("GGUF\x03", absl::StatusCode::kDataLoss,
              "truncated at offset 4 while reading version");
  std::string b = Base();
  ExpectError(b.substr(0, 20), absl::StatusCode::kDataLoss,
              "truncated at offset 16 while reading metadata_kv_count");
  b[0] = 'X';
  ExpectError(b, absl::StatusCode::kDataLoss, "bad magic at offset 0");
  b = Base();
  PutLe(&b, 4, 1, 4);
  ExpectError(b, absl::StatusCode::kUnimplemented, "unsupported GGUF version 1");
  PutLe(&b, 4, 0x03000000, 4);
  ExpectError(b, absl::StatusCode::kUnimplemented, "big-endian");
  PutLe(&b, 4, 2, 4);  // v2 has the same layout as v3
  EXPECT_TRUE(GgufFile::FromBytes(b).ok());
}

TEST(GgufCorruptTest, AbsurdCounts) {
  std::string b = Base();
  PutLe(&b, 8, 1ull << 40, 8);
  ExpectError(b, absl::StatusCode::kDataLoss, "tensor_count 1099511627776 at offset 8");
  b = Base();
  PutLe(&b, 16, ~0ull, 8);
  ExpectError(b, absl::StatusCode::kDataLoss, "metadata_kv_count 18446744073709551615");
  // String length beyond the limit, and within it but past the end.
  b = Base();
  const size_t arch_len = b.find("general.architecture") - 8;
  PutLe(&b, arch_len, (1ull << 20) + 1, 8);
  ExpectError(b, absl::StatusCode::kDataLoss, "exceeds the limit of 1048576 bytes");
  PutLe(&b, arch_len, 1000000, 8);
  ExpectError(b, absl::StatusCode::kDataLoss, "string length 1000000 exceeds the");
  b = Base();
  const size_t value_len = After(b, "general.architecture") + 4;
  PutLe(&b, value_len, (64ull << 20) + 1, 8);
  ExpectError(b, absl::StatusCode::kDataLoss, "exceeds the limit of 67108864 bytes");
  b = Base();
  const size_t array_count = After(b, "k.strs") + 8;
  PutLe(&b, array_count, 1ull << 60, 8);
  ExpectError(b, absl::StatusCode::kDataLoss, "array count 1152921504606846976 of key 'k.strs'");
}

TEST(GgufCorruptTest, KeyDefects) {
  std::string b = Base();
  b.replace(After(b, "k.two") - 3, 3, "one");
  ExpectError(b, absl::StatusCode::kDataLoss, "duplicate key 'k.one'");

  GgufWriter w = BaseWriter();
  w.SetRaw("k.bad", 13, "");
  ExpectError(w.ToBytes(), absl::StatusCode::kDataLoss, "unknown value type 13 for key 'k.bad'");
  w = BaseWriter();
  w.SetRaw("k.bad", 9, std::string("\x63\0\0\0\0\0\0\0\0\0\0\0", 12));
  ExpectError(w.ToBytes(), absl::StatusCode::kDataLoss, "unknown array element type 99");
  w = BaseWriter();
  w.SetRaw("k.bad", 7, "\x02");
  ExpectError(w.ToBytes(), absl::StatusCode::kDataLoss, "invalid bool value 2 of key 'k.bad'");
  w = BaseWriter();
  w.SetString("", "x");
  ExpectError(w.ToBytes(), absl::StatusCode::kDataLoss, "empty metadata key");
  w = BaseWriter();
  w.SetString(std::string((1 << 20) + 1, 'k'), "x");
  ExpectError(w.ToBytes(), absl::StatusCode::kDataLoss, "exceeds the limit of 1048576");
}

// `depth` nested arrays around an empty u8 array.
std::string NestedArrays(int depth) {
  std::string p;
  auto le = [&p](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) p.push_back(static_cast<char>(v >> (8 * i)));
  };
  for (int i = 1; i < depth; ++i) le(9, 4), le(1, 8);
  le(0, 4), le(0, 8);
  return p;
}

TEST(GgufCorruptTest, ArrayNestingDepth) {
  GgufWriter w = BaseWriter();
  w.SetRaw("k.nested", 9, NestedArrays(4));
  auto f = GgufFile::FromBytes(w.ToBytes());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->Find("k.nested")->DebugString(),
            "[array x 1: [array x 1: [array x 1: [u8 x 0]]]]");
  w.SetRaw("k.nested", 9, NestedArrays(5));
  ExpectError(w.ToBytes(), absl::StatusCode::kDataLoss, "arrays nested deeper than 4 levels");
}

TEST(GgufCorruptTest, AlignmentKey) {
  GgufWriter w = BaseWriter();
  w.SetString("general.alignment", "32");
  ExpectError(w.ToBytes(), absl::StatusCode::kDataLoss,
              "general.alignment has type string, expected u32");
  w.SetUint64("general.alignment", 32);
  ExpectError(w.ToBytes(), absl::StatusCode::kDataLoss, "has type u64");
  w.SetUint32("general.alignment", 0);
  ExpectError(w.ToBytes(), absl::StatusCode::kDataLoss, "general.alignment is 0");
  w.SetUint32("general.alignment", 48);
  ExpectError(w.ToBytes(), absl::StatusCode::kDataLoss, "general.alignment is 48");
  w.SetUint32("general.alignment", 32);
  EXPECT_TRUE(GgufFile::FromBytes(w.ToBytes()).ok());
}

// Field offsets of the tensor info of `name` in a Base() file (2 dims).
struct InfoAt {
  size_t n_dims, dim0, dim1, type, offset;
};
InfoAt Info(const std::string& b, std::string_view name) {
  const size_t p = After(b, name);
  return {p, p + 4, p + 12, p + 20, p + 24};
}

TEST(GgufCorruptTest, TensorShapeDefects) {
  std::string b = Base();
  PutLe(&b, Info(b, "t.one").n_dims, 0, 4);
  ExpectError(b, absl::StatusCode::kDataLoss, "tensor 't.one' has 0 dims");
  PutLe(&b, Info(b, "t.one").n_dims, 5, 4);
  ExpectError(b, absl::StatusCode::kDataLoss, "tensor 't.one' has 5 dims");
  b = Base();
  PutLe(&b, Info(b, "t.one").dim1, 0, 8);
  ExpectError(b, absl::StatusCode::kDataLoss, "tensor 't.one' has a zero dimension ne[1]");
  b = Base();
  PutLe(&b, Info(b, "t.one").dim0, 1ull << 32, 8);
  PutLe(&b, Info(b, "t.one").dim1, 1ull << 32, 8);
  ExpectError(b, absl::StatusCode::kDataLoss, "element count of tensor 't.one' overflows");
  b = Base();
  PutLe(&b, Info(b, "t.one").dim0, 1ull << 31, 8);
  PutLe(&b, Info(b, "t.one").dim1, 1ull << 31, 8);  // 2^62 f32 values: 2^64 bytes
  ExpectError(b, absl::StatusCode::kDataLoss, "byte size of tensor 't.one' overflows");
  b = Base();
  PutLe(&b, Info(b, "t.one").type, 99, 4);
  ExpectError(b, absl::StatusCode::kDataLoss, "tensor 't.one' has unknown type id 99");
  PutLe(&b, Info(b, "t.one").type, 4, 4);  // a retired ggml type id
  ExpectError(b, absl::StatusCode::kDataLoss, "tensor 't.one' has unknown type id 4");
  b = Base();
  PutLe(&b, Info(b, "t.one").type, static_cast<uint32_t>(TensorType::kQ8_0), 4);
  ExpectError(b, absl::StatusCode::kDataLoss,
              "tensor 't.one' of type q8_0 has ne[0]=8, not a multiple of the block size 32");
  b = Base();
  b.replace(After(b, "t.two") - 3, 3, "one");
  ExpectError(b, absl::StatusCode::kDataLoss, "duplicate tensor name 't.one'");
}

TEST(GgufCorruptTest, TensorPlacementDefects) {
  std::string b = Base();
  const size_t two_offset = After(b, "t.two") + 4 + 8 + 4;  // 1 dim
  PutLe(&b, two_offset, 68, 8);
  ExpectError(b, absl::StatusCode::kDataLoss,
              "tensor 't.two' offset 68 at offset " + std::to_string(two_offset) +
                  " is not a multiple of the alignment 32");
  PutLe(&b, two_offset, 32, 8);
  ExpectError(b, absl::StatusCode::kDataLoss,
              "tensors 't.one' [0, 64) and 't.two' [32, 288) overlap");
  PutLe(&b, two_offset, 1ull << 40, 8);
  ExpectError(b, absl::StatusCode::kDataLoss, "tensor 't.two' data (256 bytes at data offset");
  PutLe(&b, two_offset, ~0ull << 5, 8);  // aligned, and offset + size overflows
  ExpectError(b, absl::StatusCode::kDataLoss, "extends past the end of the file");
  b = Base();
  ExpectError(b.substr(0, b.size() - 1), absl::StatusCode::kDataLoss,
              "tensor 't.two' data (256 bytes at data offset 64");
  // Cut inside the padding between the tensor table and the data section.
  b = Base();
  auto f = GgufFile::FromBytes(b);
  ASSERT_TRUE(f.ok());
  const size_t table_end = After(b, "t.two") + 4 + 8 + 4 + 8;
  ASSERT_LT(table_end, (*f)->data_offset());
  ExpectError(b.substr(0, table_end + 1), absl::StatusCode::kDataLoss,
              "while reading padding before the data section");
}

// ---- Corpus walk over corrupted copies of the bundled models. ----

// Offsets of every u64 string length and array count in a well-formed file,
// and the end of the tensor table. Trusts its input.
struct Layout {
  std::vector<size_t> length_fields;
  size_t table_end = 0;
};

Layout Walk(const std::string& b) {
  Layout l;
  size_t pos = 24;
  auto u32 = [&](size_t p) {
    uint32_t v;
    std::memcpy(&v, b.data() + p, 4);
    return v;
  };
  auto u64 = [&](size_t p) {
    uint64_t v;
    std::memcpy(&v, b.data() + p, 8);
    return v;
  };
  auto str = [&]() {
    l.length_fields.push_back(pos);
    pos += 8 + u64(pos);
  };
  std::function<void(uint32_t)> value = [&](uint32_t type) {
    if (type == 8) return str();
    if (type == 9) {
      const uint32_t elem = u32(pos);
      const uint64_t n = u64(pos + 4);
      l.length_fields.push_back(pos + 4);
      pos += 12;
      for (uint64_t i = 0; i < n; ++i) value(elem);
      return;
    }
    pos += GgufFixedSize(static_cast<GgufValueType>(type));
  };
  const uint64_t n_tensors = u64(8), n_kv = u64(16);
  for (uint64_t i = 0; i < n_kv; ++i) {
    str();
    const uint32_t type = u32(pos);
    pos += 4;
    value(type);
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    str();
    pos += 4 + 8 * u32(pos) + 4 + 8;
  }
  l.table_end = pos;
  return l;
}

// What a successful parse promises, checked against the buffer's bounds.
void CheckInvariants(const GgufFile& f, const uint8_t* base) {
  ASSERT_LE(f.data_offset(), f.file_size());
  ASSERT_EQ(f.data_offset() % f.alignment(), 0u);
  for (const auto& [key, value] : f.metadata()) {
    (void)value.DebugString();
    (void)f.GetStringArray(key);
    (void)f.GetIntArray(key);
    (void)f.GetFloatArray(key);
  }
  uint64_t total = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    ASSERT_GE(t.dims.size(), 1u);
    ASSERT_LE(t.dims.size(), 4u);
    ASSERT_EQ(t.data, base + f.data_offset() + t.offset);
    ASSERT_LE(t.offset + t.n_bytes, f.file_size() - f.data_offset()) << t.name;
    volatile uint8_t touch = t.data[0] ^ t.data[t.n_bytes - 1];  // ASan checks the bounds
    (void)touch;
    total += t.n_bytes;
  }
  ASSERT_LE(total, f.file_size() - f.data_offset());  // no overlaps implies this
}

class GgufCorpusTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    bytes_ = ReadAll(kModels + GetParam());
    ASSERT_GT(bytes_.size(), 0u);
    auto f = GgufFile::FromBytes(bytes_);
    ASSERT_TRUE(f.ok()) << f.status();
    data_offset_ = (*f)->data_offset();
    for (const GgufTensorInfo& t : (*f)->tensors()) {
      data_end_ = std::max<size_t>(data_end_, data_offset_ + t.offset + t.n_bytes);
    }
    layout_ = Walk(bytes_);
    ASSERT_EQ((layout_.table_end + 31) / 32 * 32, data_offset_);
  }
  std::string bytes_;
  size_t data_offset_ = 0;
  size_t data_end_ = 0;  // end of the last tensor's bytes
  Layout layout_;
};

// Any cut before the end of the last tensor's bytes is an error. (Padding
// after the last tensor is optional: cutting it off leaves a valid file.)
TEST_P(GgufCorpusTest, EveryTruncationIsAnError) {
  std::vector<size_t> cuts;
  for (size_t n = 0; n <= data_offset_; ++n) cuts.push_back(n);
  const size_t data_size = data_end_ - data_offset_;
  for (size_t i = 1; i < 97; ++i) cuts.push_back(data_offset_ + data_size * i / 97);
  cuts.push_back(data_end_ - 1);
  for (size_t n : cuts) {
    auto f = GgufFile::FromBytes(bytes_.substr(0, n));
    ASSERT_FALSE(f.ok()) << "truncated to " << n << " bytes parsed";
    ASSERT_EQ(f.status().code(), absl::StatusCode::kDataLoss) << n << ": " << f.status();
  }
  for (size_t n = data_end_; n <= bytes_.size(); ++n) {
    EXPECT_TRUE(GgufFile::FromBytes(bytes_.substr(0, n)).ok()) << n;
  }
}

TEST_P(GgufCorpusTest, InflatedCountsAreErrors) {
  const uint64_t kHuge[] = {~0ull, 1ull << 63, 1ull << 40, bytes_.size()};
  std::vector<size_t> fields = {8, 16};  // tensor_count, metadata_kv_count
  for (size_t i = 0; i < layout_.length_fields.size(); i += 5) {
    fields.push_back(layout_.length_fields[i]);
  }
  ASSERT_GT(fields.size(), 100u);
  for (size_t field : fields) {
    for (uint64_t v : kHuge) {
      std::string b = bytes_;
      PutLe(&b, field, v, 8);
      auto f = GgufFile::FromBytes(std::move(b));
      ASSERT_FALSE(f.ok()) << "field at " << field << " = " << v << " parsed";
      ASSERT_EQ(f.status().code(), absl::StatusCode::kDataLoss) << f.status();
    }
  }
  // One more tensor or key than the file holds.
  for (size_t field : {8, 16}) {
    std::string b = bytes_;
    b[field]++;
    EXPECT_FALSE(GgufFile::FromBytes(std::move(b)).ok()) << field;
  }
}

TEST_P(GgufCorpusTest, RandomByteFlipsNeverCrash) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<size_t> where(0, layout_.table_end - 1);
  std::uniform_int_distribution<int> flip(1, 255);
  int parsed = 0;
  for (int i = 0; i < 1500; ++i) {
    std::string b = bytes_;
    const int n_flips = 1 + i % 3;
    for (int k = 0; k < n_flips; ++k) b[where(rng)] ^= static_cast<char>(flip(rng));
    auto f = GgufFile::FromBytes(std::move(b));
    if (!f.ok()) {
      ASSERT_FALSE(f.status().message().empty());
      continue;
    }
    ++parsed;
    const auto& t = (*f)->tensors();
    CheckInvariants(**f, t.empty() ? nullptr : t[0].data - (*f)->data_offset() - t[0].offset);
  }
  // Most flips land in strings or values and still parse; some must not.
  EXPECT_LT(parsed, 1500);
  std::printf("%s: %d of 1500 flipped files parsed\n", GetParam(), parsed);
}

INSTANTIATE_TEST_SUITE_P(Models, GgufCorpusTest,
                         ::testing::Values("stories260K-f32.gguf", "stories260K-q8_0.gguf"),
                         [](const auto& info) {
                           return std::string(info.param).find("f32") != std::string::npos
                                      ? std::string("F32")
                                      : std::string("Q8_0");
                         });

}  // namespace
}  // namespace ringlm
