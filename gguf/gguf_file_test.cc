// Parses the bundled stories260K GGUF files and round-trips the writer.
#include "gguf/gguf_file.h"

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>

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

std::unique_ptr<GgufFile> OpenOrDie(const std::string& name) {
  auto f = GgufFile::Open(kModels + name);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? std::move(*f) : nullptr;
}

// GGUF dims of every tensor in the stories260K files (README.md).
std::map<std::string, std::vector<uint64_t>> ExpectedShapes() {
  std::map<std::string, std::vector<uint64_t>> m = {
      {"token_embd.weight", {64, 512}},
      {"output.weight", {64, 512}},
      {"output_norm.weight", {64}},
  };
  for (int i = 0; i < 5; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    m[b + "attn_norm.weight"] = {64};
    m[b + "attn_q.weight"] = {64, 64};
    m[b + "attn_k.weight"] = {64, 32};
    m[b + "attn_v.weight"] = {64, 32};
    m[b + "attn_output.weight"] = {64, 64};
    m[b + "ffn_norm.weight"] = {64};
    m[b + "ffn_gate.weight"] = {64, 172};
    m[b + "ffn_up.weight"] = {64, 172};
    m[b + "ffn_down.weight"] = {172, 64};
  }
  return m;
}

TEST(GgufFileTest, ParsesF32ModelHeader) {
  auto f = OpenOrDie("stories260K-f32.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(f->file_size(), 1185376u);
  EXPECT_EQ(f->data_offset(), 14176u);
  ASSERT_EQ(f->metadata().size(), 19u);
  EXPECT_EQ(f->metadata()[0].first, "tokenizer.ggml.tokens");  // file order

  EXPECT_EQ(*f->GetString("general.architecture"), "llama");
  EXPECT_EQ(*f->GetString("general.name"), "llama");
  EXPECT_EQ(*f->GetString("tokenizer.ggml.model"), "llama");
  EXPECT_EQ(*f->GetUint("llama.context_length"), 128u);
  EXPECT_EQ(*f->GetUint("llama.embedding_length"), 64u);
  EXPECT_EQ(*f->GetUint("llama.feed_forward_length"), 172u);
  EXPECT_EQ(*f->GetUint("llama.block_count"), 5u);
  EXPECT_EQ(*f->GetUint("llama.attention.head_count"), 8u);
  EXPECT_EQ(*f->GetUint("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(*f->GetUint("llama.rope.dimension_count"), 8u);
  EXPECT_FLOAT_EQ(*f->GetFloat("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.unknown_token_id"), 0u);
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.bos_token_id"), 1u);
  EXPECT_EQ(*f->GetInt("tokenizer.ggml.eos_token_id"), 2);
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.seperator_token_id"), 4294967295u);
  EXPECT_EQ(*f->GetUint("tokenizer.ggml.padding_token_id"), 4294967295u);
  EXPECT_EQ(f->Find("general.file_type"), nullptr);

  auto tokens = f->GetStringArray("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  ASSERT_EQ(tokens->size(), 512u);
  EXPECT_EQ((*tokens)[0], "<unk>");
  EXPECT_EQ((*tokens)[1], "<s>");
  EXPECT_EQ((*tokens)[2], "</s>");
  EXPECT_EQ((*tokens)[3], "<0x00>");
  EXPECT_EQ((*tokens)[258], "<0xFF>");
  EXPECT_EQ((*tokens)[259], "\xe2\x96\x81t");  // "▁t"
  EXPECT_EQ((*tokens)[260], "he");
  auto scores = f->GetFloatArray("tokenizer.ggml.scores");
  ASSERT_TRUE(scores.ok()) << scores.status();
  ASSERT_EQ(scores->size(), 512u);
  EXPECT_EQ((*scores)[259], 0.0f);
  EXPECT_EQ((*scores)[260], -1.0f);
  EXPECT_EQ((*scores)[511], -252.0f);
  auto types = f->GetIntArray("tokenizer.ggml.token_type");
  ASSERT_TRUE(types.ok()) << types.status();
  ASSERT_EQ(types->size(), 512u);
  EXPECT_EQ((*types)[0], 2);
  EXPECT_EQ((*types)[1], 3);
  EXPECT_EQ((*types)[2], 3);

  const GgufValue* tv = f->Find("tokenizer.ggml.tokens");
  ASSERT_NE(tv, nullptr);
  EXPECT_EQ(tv->type(), GgufValueType::kArray);
  EXPECT_EQ(tv->array_type(), GgufValueType::kString);
  EXPECT_EQ(tv->array_size(), 512u);
  EXPECT_EQ(tv->array_element(1).AsString(), "<s>");
  EXPECT_EQ(tv->array_element(512).type(), GgufValueType::kUint8);  // out of range: default
  EXPECT_EQ(tv->DebugString(), "[string x 512: \"<unk>\", \"<s>\", \"</s>\", ...]");
}

TEST(GgufFileTest, ParsesF32ModelTensors) {
  auto f = OpenOrDie("stories260K-f32.gguf");
  ASSERT_NE(f, nullptr);
  const auto shapes = ExpectedShapes();
  ASSERT_EQ(f->tensors().size(), 48u);
  for (const GgufTensorInfo& t : f->tensors()) {
    auto it = shapes.find(t.name);
    ASSERT_NE(it, shapes.end()) << t.name;
    EXPECT_EQ(t.dims, it->second) << t.name;
    EXPECT_EQ(t.type, TensorType::kF32) << t.name;
    uint64_t n = 1;
    for (uint64_t d : t.dims) n *= d;
    EXPECT_EQ(t.n_elements, n);
    EXPECT_EQ(t.n_bytes, 4 * n);
    EXPECT_EQ(t.rows(), n / t.dims[0]);
    EXPECT_EQ(t.offset % 32, 0u);
    EXPECT_EQ(f->FindTensor(t.name), &t);
  }
  auto embd = f->RequireTensor("token_embd.weight");
  ASSERT_TRUE(embd.ok());
  EXPECT_EQ((*embd)->rows(), 512u);
  // The weights are the llama2.c checkpoint's, verbatim: the token embedding
  // follows its 7-int32 header.
  const std::string bin = ReadAll(kModels + "stories260K.bin");
  ASSERT_GE(bin.size(), 28u + (*embd)->n_bytes);
  EXPECT_EQ(std::memcmp((*embd)->data, bin.data() + 28, (*embd)->n_bytes), 0);
  f->Prefetch(**embd);

  auto missing = f->RequireTensor("blk.5.attn_q.weight");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("missing required tensor 'blk.5.attn_q.weight'"));
}

TEST(GgufFileTest, ParsesQ8Model) {
  auto f = OpenOrDie("stories260K-q8_0.gguf");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->metadata().size(), 21u);
  EXPECT_EQ(*f->GetUint("general.file_type"), 7u);
  EXPECT_EQ(*f->GetUint("general.quantization_version"), 2u);
  const auto shapes = ExpectedShapes();
  ASSERT_EQ(f->tensors().size(), 48u);
  std::map<TensorType, int> counts;
  for (const GgufTensorInfo& t : f->tensors()) {
    ++counts[t.type];
    EXPECT_EQ(t.dims, shapes.at(t.name)) << t.name;
    if (t.name.find("ffn_down") != std::string::npos) {
      EXPECT_EQ(t.type, TensorType::kF16) << t.name;
      EXPECT_EQ(t.n_bytes, 172u * 64 * 2);
    } else if (t.dims.size() == 1) {
      EXPECT_EQ(t.type, TensorType::kF32) << t.name;
    } else {
      EXPECT_EQ(t.type, TensorType::kQ8_0) << t.name;
      EXPECT_EQ(t.n_bytes, t.n_elements / 32 * 34) << t.name;
    }
  }
  EXPECT_EQ(counts[TensorType::kQ8_0], 32);
  EXPECT_EQ(counts[TensorType::kF16], 5);
  EXPECT_EQ(counts[TensorType::kF32], 11);
}

TEST(GgufFileTest, FromBytesMatchesOpen) {
  auto opened = OpenOrDie("stories260K-q8_0.gguf");
  ASSERT_NE(opened, nullptr);
  auto parsed = GgufFile::FromBytes(ReadAll(kModels + "stories260K-q8_0.gguf"));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const GgufFile& b = **parsed;
  EXPECT_EQ(b.data_offset(), opened->data_offset());
  ASSERT_EQ(b.tensors().size(), opened->tensors().size());
  for (size_t i = 0; i < b.tensors().size(); ++i) {
    const GgufTensorInfo& x = opened->tensors()[i];
    const GgufTensorInfo& y = b.tensors()[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.offset, y.offset);
    EXPECT_EQ(std::memcmp(x.data, y.data, x.n_bytes), 0) << x.name;
    b.Prefetch(y);  // no-op
  }
}

TEST(GgufFileTest, GettersReportMissingKeysAndWrongTypes) {
  auto f = OpenOrDie("stories260K-f32.gguf");
  ASSERT_NE(f, nullptr);
  auto s = f->GetString("llama.nope");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.status().message(), HasSubstr("missing required key 'llama.nope'"));
  s = f->GetString("llama.block_count");
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(),
              HasSubstr("key 'llama.block_count' has type u32, expected string"));
  auto u = f->GetUint("general.name");
  EXPECT_EQ(u.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(u.status().message(), HasSubstr("has type string"));
  EXPECT_EQ(f->GetUint("llama.attention.layer_norm_rms_epsilon").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->GetBool("general.name").status().code(), absl::StatusCode::kInvalidArgument);
  auto fa = f->GetFloatArray("tokenizer.ggml.tokens");
  EXPECT_EQ(fa.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(fa.status().message(), HasSubstr("has type array of string, expected array of f32"));
  EXPECT_EQ(f->GetStringArray("tokenizer.ggml.scores").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->GetIntArray("tokenizer.ggml.scores").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f->GetStringArray("general.name").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*f->GetFloat("llama.block_count"), 5.0);  // integers widen
}

TEST(GgufFileTest, OpenReportsFilesystemErrors) {
  auto missing = GgufFile::Open(kModels + "no-such-model.gguf");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("no-such-model.gguf"));
  EXPECT_EQ(GgufFile::Open(kModels).status().code(), absl::StatusCode::kInvalidArgument);

  const std::string empty = ::testing::TempDir() + "/gguf_empty_" + std::to_string(getpid());
  { std::ofstream(empty, std::ios::binary); }
  auto e = GgufFile::Open(empty);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(e.status().message(), HasSubstr("truncated at offset 0 while reading magic"));
  EXPECT_THAT(e.status().message(), HasSubstr(empty));
  ::unlink(empty.c_str());
}

// Copying every key and tensor of a llama.cpp-written file through the
// writer reproduces the file byte for byte.
TEST(GgufWriterTest, RewritesModelByteForByte) {
  for (const char* name : {"stories260K-f32.gguf", "stories260K-q8_0.gguf"}) {
    auto f = OpenOrDie(name);
    ASSERT_NE(f, nullptr);
    GgufWriter w;
    for (const auto& [key, value] : f->metadata()) w.SetValue(key, value);
    for (const GgufTensorInfo& t : f->tensors()) {
      ASSERT_TRUE(w.AddTensor(t.name, t.dims, t.type,
                              std::string(reinterpret_cast<const char*>(t.data), t.n_bytes))
                      .ok());
    }
    const std::string bytes = w.ToBytes();
    EXPECT_TRUE(bytes == ReadAll(kModels + name)) << name;
  }
}

TEST(GgufWriterTest, RoundTripsEveryValueType) {
  GgufWriter w;
  w.SetUint8("u8", 255);
  w.SetInt8("i8", -128);
  w.SetUint16("u16", 65535);
  w.SetInt16("i16", -32768);
  w.SetUint32("u32", 4294967295u);
  w.SetInt32("i32", std::numeric_limits<int32_t>::min());
  w.SetUint64("u64", std::numeric_limits<uint64_t>::max());
  w.SetInt64("i64", std::numeric_limits<int64_t>::min());
  w.SetFloat32("f32", 1.5f);
  w.SetFloat64("f64", -2.25e300);
  w.SetBool("bool", true);
  w.SetString("str", std::string("a\0b", 3));
  w.SetString("empty", "");
  w.SetStringArray("a.str", {"x", "", "zz"});
  w.SetUint8Array("a.u8", std::vector<uint8_t>{0, 255});
  w.SetInt8Array("a.i8", std::vector<int8_t>{-1, 127});
  w.SetUint16Array("a.u16", std::vector<uint16_t>{65535});
  w.SetInt16Array("a.i16", std::vector<int16_t>{-2});
  w.SetUint32Array("a.u32", std::vector<uint32_t>{7, 4294967295u});
  w.SetInt32Array("a.i32", std::vector<int32_t>{-5, 6});
  w.SetUint64Array("a.u64", std::vector<uint64_t>{1, std::numeric_limits<uint64_t>::max()});
  w.SetInt64Array("a.i64", std::vector<int64_t>{-9});
  w.SetFloatArray("a.f32", std::vector<float>{0.5f, -3.0f});
  w.SetFloat64Array("a.f64", std::vector<double>{1e-300});
  w.SetBoolArray("a.bool", {true, false, true});
  w.SetFloatArray("a.empty", std::vector<float>{});
  w.SetUint32("replaced", 1);
  w.SetUint32("replaced", 2);  // keeps its place, takes the new value
  // [[1, 2], []] as nested arrays of u16, encoded by hand.
  std::string nested;
  auto le = [&nested](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) nested.push_back(static_cast<char>(v >> (8 * i)));
  };
  le(9, 4), le(2, 8);                      // array of 2 arrays
  le(2, 4), le(2, 8), le(1, 2), le(2, 2);  // u16 [1, 2]
  le(2, 4), le(0, 8);                      // u16 []
  w.SetRaw("nested", 9, nested);

  auto parsed = GgufFile::FromBytes(w.ToBytes());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const GgufFile& f = **parsed;
  EXPECT_EQ(f.version(), 3u);
  EXPECT_TRUE(f.tensors().empty());
  EXPECT_EQ(f.metadata().size(), 28u);
  EXPECT_EQ(*f.GetUint("u8"), 255u);
  EXPECT_EQ(*f.GetInt("i8"), -128);
  EXPECT_EQ(*f.GetUint("u16"), 65535u);
  EXPECT_EQ(*f.GetInt("i16"), -32768);
  EXPECT_EQ(*f.GetUint("u32"), 4294967295u);
  EXPECT_EQ(*f.GetInt("i32"), std::numeric_limits<int32_t>::min());
  EXPECT_EQ(*f.GetUint("u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*f.GetInt("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*f.GetFloat("f32"), 1.5);
  EXPECT_EQ(*f.GetFloat("f64"), -2.25e300);
  EXPECT_TRUE(*f.GetBool("bool"));
  EXPECT_EQ(*f.GetString("str"), std::string("a\0b", 3));
  EXPECT_EQ(*f.GetString("empty"), "");
  EXPECT_EQ(f.Find("u8")->type(), GgufValueType::kUint8);
  EXPECT_EQ(f.Find("i16")->type(), GgufValueType::kInt16);
  EXPECT_EQ(f.Find("f64")->type(), GgufValueType::kFloat64);
  // Plain accessors never fail; the Try* ones check type and range.
  const GgufValue& i8 = *f.Find("i8");
  EXPECT_EQ(i8.AsInt64(), -128);
  EXPECT_EQ(i8.AsUint64(), static_cast<uint64_t>(-128));
  EXPECT_FALSE(i8.TryUint64().has_value());
  EXPECT_EQ(*i8.TryInt64(), -128);
  EXPECT_EQ(*i8.TryDouble(), -128.0);
  EXPECT_EQ(i8.AsString(), "");
  EXPECT_FALSE(i8.AsBool());
  EXPECT_FALSE(f.Find("u64")->TryInt64().has_value());
  EXPECT_FALSE(f.Find("str")->TryDouble().has_value());
  EXPECT_EQ(f.Find("str")->AsUint64(), 0u);
  EXPECT_EQ(f.Find("f32")->AsDouble(), 1.5);
  // Sign and range checks of the integer getters.
  EXPECT_EQ(f.GetUint("i8").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f.GetUint("i8").status().message(), HasSubstr("negative value -128"));
  EXPECT_EQ(f.GetInt("u64").status().code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(*f.GetStringArray("a.str"), (std::vector<std::string_view>{"x", "", "zz"}));
  EXPECT_EQ(*f.GetIntArray("a.u8"), (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(*f.GetIntArray("a.i8"), (std::vector<int64_t>{-1, 127}));
  EXPECT_EQ(*f.GetIntArray("a.u16"), (std::vector<int64_t>{65535}));
  EXPECT_EQ(*f.GetIntArray("a.i16"), (std::vector<int64_t>{-2}));
  EXPECT_EQ(*f.GetIntArray("a.u32"), (std::vector<int64_t>{7, 4294967295}));
  EXPECT_EQ(*f.GetIntArray("a.i32"), (std::vector<int64_t>{-5, 6}));
  EXPECT_EQ(f.GetIntArray("a.u64").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(f.Find("a.u64")->array_element(1).AsUint64(), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*f.GetIntArray("a.i64"), (std::vector<int64_t>{-9}));
  EXPECT_EQ(*f.GetFloatArray("a.f32"), (std::vector<float>{0.5f, -3.0f}));
  EXPECT_EQ(*f.GetFloatArray("a.f64"), (std::vector<float>{static_cast<float>(1e-300)}));
  const GgufValue* bools = f.Find("a.bool");
  ASSERT_EQ(bools->array_size(), 3u);
  EXPECT_TRUE(bools->array_element(0).AsBool());
  EXPECT_FALSE(bools->array_element(1).AsBool());
  EXPECT_EQ(f.GetFloatArray("a.empty")->size(), 0u);
  EXPECT_EQ(f.metadata()[26].first, "replaced");
  EXPECT_EQ(*f.GetUint("replaced"), 2u);

  const GgufValue* n = f.Find("nested");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->array_type(), GgufValueType::kArray);
  ASSERT_EQ(n->array_size(), 2u);
  const GgufValue inner = n->array_element(0);
  EXPECT_EQ(inner.array_type(), GgufValueType::kUint16);
  EXPECT_EQ(inner.array_element(1).AsUint64(), 2u);
  EXPECT_EQ(n->array_element(1).array_size(), 0u);
  EXPECT_EQ(n->DebugString(), "[array x 2: [u16 x 2: 1, 2], [u16 x 0]]");

  // Copy every value through SetValue: the bytes come out the same.
  GgufWriter copy;
  for (const auto& [key, value] : f.metadata()) copy.SetValue(key, value);
  EXPECT_TRUE(copy.ToBytes() == w.ToBytes());
}

TEST(GgufWriterTest, AlignsTensorsTo64) {
  GgufWriter w;
  ASSERT_TRUE(w.SetAlignment(64).ok());
  EXPECT_EQ(w.SetAlignment(48).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(w.SetAlignment(0).code(), absl::StatusCode::kInvalidArgument);
  w.SetString("general.architecture", "test");
  std::string a(3 * 4, '\x01'), b(2 * 5 * 2, '\x02'), c(34 * 2, '\x03');
  ASSERT_TRUE(w.AddTensor("a", {3}, TensorType::kF32, a).ok());
  ASSERT_TRUE(w.AddTensor("b", {2, 5}, TensorType::kF16, b).ok());
  ASSERT_TRUE(w.AddTensor("c", {64, 1, 1, 1}, TensorType::kQ8_0, c).ok());

  const std::string path = ::testing::TempDir() + "/gguf_align64_" + std::to_string(getpid());
  ASSERT_TRUE(w.WriteFile(path).ok());
  auto f = GgufFile::Open(path);
  ::unlink(path.c_str());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ(*(*f)->GetUint("general.alignment"), 64u);
  EXPECT_EQ((*f)->data_offset() % 64, 0u);
  const std::vector<std::string> want = {a, b, c};
  ASSERT_EQ((*f)->tensors().size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const GgufTensorInfo& t = (*f)->tensors()[i];
    EXPECT_EQ(t.offset, 64 * i) << t.name;
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(t.data), t.n_bytes), want[i]);
  }
  EXPECT_EQ((*f)->tensors()[2].dims, (std::vector<uint64_t>{64, 1, 1, 1}));
  EXPECT_EQ((*f)->tensors()[1].rows(), 5u);
  EXPECT_EQ((*f)->file_size(), (*f)->data_offset() + 4 * 64);  // c: 68 bytes + 60 padding
  // Going back to the default drops the key again.
  ASSERT_TRUE(w.SetAlignment(32).ok());
  auto g = GgufFile::FromBytes(w.ToBytes());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ((*g)->Find("general.alignment"), nullptr);
  EXPECT_EQ((*g)->tensors()[1].offset, 32u);
}

TEST(GgufWriterTest, AddTensorChecksShapeAndSize) {
  GgufWriter w;
  ASSERT_TRUE(w.AddTensor("t", {4}, TensorType::kF32, std::string(16, 0)).ok());
  auto expect = [](absl::Status s, std::string_view text) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(std::string(text)));
  };
  expect(w.AddTensor("t", {4}, TensorType::kF32, std::string(16, 0)), "duplicate tensor name 't'");
  expect(w.AddTensor("", {4}, TensorType::kF32, std::string(16, 0)), "empty");
  expect(w.AddTensor("u", {}, TensorType::kF32, ""), "0 dims");
  expect(w.AddTensor("u", {1, 1, 1, 1, 1}, TensorType::kF32, std::string(4, 0)), "5 dims");
  expect(w.AddTensor("u", {4, 0}, TensorType::kF32, ""), "zero dim");
  expect(w.AddTensor("u", {4}, TensorType::kF32, std::string(15, 0)), "needs 16 bytes, got 15");
  expect(w.AddTensor("u", {48}, TensorType::kQ8_0, std::string(51, 0)),
         "ne[0]=48, not a multiple of the block size 32");
  expect(w.AddTensor("u", {1ull << 32, 1ull << 32}, TensorType::kF32, ""), "overflows");
}

}  // namespace
}  // namespace ringlm
