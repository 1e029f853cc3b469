// fuzz_seed_gen: writes the generated seed corpora of fuzz/corpus.
//
//   build-fuzz/fuzz_seed_gen fuzz/corpus [path/to/stories260K-f32.gguf]
//
// writes fuzz/corpus/{announcement_fuzzer,stage_step_fuzzer,gguf_fuzzer}/*
// (chat_request_fuzzer's seeds are hand-written JSON and not touched). The
// output is committed; rerun after a wire-format change. Announcements carry
// a random nonce, so each run gives different (equally valid) bytes.
//
// Seeds are small (a few KB per target) and either valid, so the fuzzer
// starts past the checks, or one field away from valid.
#include <sys/stat.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "daemon/stage/step_validator.h"
#include "discovery/announcement.h"
#include "fuzz/fuzz_constants.h"
#include "fuzz/step_limits.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "inference/model_config.h"
#include "inference/tokenizer/tokenizer.h"
#include "inference/vocabulary_loader.h"
#include "proto/ringlm.pb.h"
#include "security/crypto.h"

namespace ringlm {
namespace {

int g_errors = 0;

void Write(const std::string& dir, const std::string& name, const std::string& bytes) {
  ::mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    ++g_errors;
    return;
  }
  std::printf("%6zu  %s\n", bytes.size(), path.c_str());
}

void Expect(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "seed check failed: %s\n", what.c_str());
  ++g_errors;
}

// ---- announcement_fuzzer -----------------------------------------------------

Announcement TypicalAnnouncement() {
  Announcement a;
  a.node_id = "node-a";
  a.instance_id = 0x8badf00d12345678ull;
  a.grpc_port = 50051;
  a.model_fingerprint = std::string(fuzz::kModelFingerprint);
  a.caps.total_memory_bytes = 16ull << 30;
  a.caps.usable_memory_bytes = 8ull << 30;
  a.caps.matmul_gflops = 12.5;
  a.caps.read_gbps = 9.5;
  a.caps.placement = Placement::kSpeed;
  a.caps.threads = 2;
  a.caps.cpu_model = "Intel(R) Xeon(R) CPU @ 2.20GHz";
  a.grpc_host = "10.99.0.1";
  a.spki_fingerprint = Sha256("node-a spki");
  a.timestamp_ms = 1733040000000ull;
  return a;
}

void WriteAnnouncements(const std::string& dir) {
  const std::string key(fuzz::kMacKey);
  auto emit = [&](const std::string& name, const Announcement& a, bool valid) {
    Expect(ValidateAnnouncement(a).ok() == valid, name + " validity");
    const std::string d = EncodeAnnouncement(a, key);
    Expect(DecodeAnnouncement(d, key).ok() == valid, name + " decodes");
    Write(dir, name, d);
  };

  Announcement minimal;
  minimal.node_id = "a";
  minimal.grpc_port = 1;
  emit("minimal.bin", minimal, true);

  emit("typical.bin", TypicalAnnouncement(), true);

  Announcement maximal = TypicalAnnouncement();
  maximal.node_id = std::string(kMaxNodeIdBytes, 'n');
  maximal.model_fingerprint = std::string(kMaxModelFingerprintBytes, '\xff');
  maximal.caps.cpu_model = std::string(kMaxCpuModelBytes, '~');
  maximal.grpc_host = std::string(kMaxGrpcHostBytes, 'h');
  maximal.caps.total_memory_bytes = maximal.caps.usable_memory_bytes = UINT64_MAX;
  maximal.caps.threads = UINT32_MAX;
  maximal.caps.matmul_gflops = std::numeric_limits<double>::max();
  maximal.caps.read_gbps = std::numeric_limits<double>::max();
  maximal.instance_id = maximal.timestamp_ms = UINT64_MAX;
  maximal.grpc_port = 65535;
  emit("maximal.bin", maximal, true);

  Announcement v6 = TypicalAnnouncement();
  v6.grpc_host = "fd00::1";
  v6.spki_fingerprint.clear();
  v6.caps.matmul_gflops = -0.0;
  v6.caps.cpu_model.clear();
  emit("ipv6_no_tls.bin", v6, true);

  // One field away from valid: still signed, rejected as a bad field.
  Announcement nan = TypicalAnnouncement();
  nan.caps.matmul_gflops = std::nan("");
  emit("bad_gflops.bin", nan, false);
  Announcement bad_placement = TypicalAnnouncement();
  bad_placement.caps.placement = static_cast<Placement>(9);
  emit("bad_placement.bin", bad_placement, false);
  Announcement short_spki = TypicalAnnouncement();
  short_spki.spki_fingerprint = "0123456789abcdef";
  emit("bad_spki.bin", short_spki, false);
  Announcement bad_id = TypicalAnnouncement();
  bad_id.node_id = "node a";
  emit("bad_node_id.bin", bad_id, false);
}

// ---- stage_step_fuzzer -------------------------------------------------------

// Stage `self_index` of a plan over the 5 layers, with `ids` as the nodes.
v1::StageStepRequest Step(std::vector<std::string> ids, uint32_t self_index, int n_tokens,
                          uint32_t position) {
  v1::StageStepRequest r;
  r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  r.set_request_id("req-7f3a");
  r.set_session_id("sess-7f3a");
  r.set_origin(ids[0]);
  v1::Plan* plan = r.mutable_plan();
  plan->set_epoch(3);
  plan->set_model_fingerprint(std::string(fuzz::kModelFingerprint));
  plan->set_n_layers(fuzz::kNLayer);
  const uint32_t per = fuzz::kNLayer / static_cast<uint32_t>(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    v1::PlanStage* s = plan->add_stages();
    s->set_node_id(ids[i]);
    s->set_address("10.99.0." + std::to_string(i + 1) + ":50051");
    s->set_first_layer(static_cast<uint32_t>(i) * per);
    s->set_last_layer(i + 1 == ids.size() ? fuzz::kNLayer : static_cast<uint32_t>(i + 1) * per);
  }
  r.set_stage_index(self_index);
  r.set_position(position);
  for (int i = 0; i < n_tokens; ++i) r.add_tokens((i * 97 + 1) % static_cast<int>(fuzz::kNVocab));
  v1::SamplingParams* s = r.mutable_sampling();
  s->set_temperature(0.8f);
  s->set_top_p(0.95f);
  s->set_top_k(40);
  s->set_seed(42);
  r.mutable_limits()->set_max_tokens(64);
  r.set_sample(true);
  return r;
}

void SetHidden(v1::StageStepRequest& r, v1::DType dtype) {
  const int n = r.tokens_size();
  v1::Tensor* h = r.mutable_hidden();
  h->set_dtype(dtype);
  h->clear_shape();
  h->add_shape(static_cast<uint64_t>(n));
  h->add_shape(fuzz::kNEmbd);
  const size_t width = dtype == v1::DTYPE_F16 ? 2 : 4;
  std::string data(static_cast<size_t>(n) * fuzz::kNEmbd * width, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  h->set_data(std::move(data));
}

void WriteSteps(const std::string& dir) {
  const StepLimits limits = fuzz::StoriesStepLimits();
  auto emit = [&](const std::string& name, const v1::StageStepRequest& r, bool valid) {
    const absl::Status s = ValidateStageStep(r, limits);
    Expect(s.ok() == valid, name + ": " + std::string(s.message()));
    Write(dir, name, r.SerializeAsString());
  };

  // Stage 0 of two: token ids, no hidden states (a prompt chunk).
  v1::StageStepRequest first = Step({"node-b", "node-c"}, 0, 5, 0);
  emit("stage0_prompt.pb", first, true);
  // Stage 1 of two: hidden states in f32.
  v1::StageStepRequest f32 = Step({"node-a", "node-b"}, 1, 2, 0);
  SetHidden(f32, v1::DTYPE_F32);
  emit("stage1_f32.pb", f32, true);
  // A decode step on the middle of three stages, f16 on the wire.
  v1::StageStepRequest f16 = Step({"node-a", "node-b", "node-c"}, 1, 1, 100);
  SetHidden(f16, v1::DTYPE_F16);
  f16.set_wire_dtype(v1::DTYPE_F16);
  f16.set_generated(12);
  emit("stage1_f16_decode.pb", f16, true);
  // A single-stage plan reusing a cached prefix, forked from another session.
  v1::StageStepRequest reuse = Step({"node-b"}, 0, 3, 16);
  reuse.set_reuse_len(16);
  reuse.set_reuse_digest(Sha256("prefix"));
  reuse.set_fork_from("sess-0001");
  reuse.mutable_sampling()->set_temperature(0);
  reuse.mutable_limits()->set_ignore_eos(true);
  emit("single_stage_reuse.pb", reuse, true);
  // The last positions of the context.
  v1::StageStepRequest last = Step({"node-b", "node-c"}, 0, 2, fuzz::kContextSize - 2);
  emit("context_end.pb", last, true);

  // A speculative decode step on the last of two stages: a token and three
  // drafts, after a step whose two drafts were rejected.
  v1::StageStepRequest drafts = Step({"node-a", "node-b"}, 1, 4, 40);
  SetHidden(drafts, v1::DTYPE_F32);
  drafts.set_sample(true);
  drafts.set_drafts(3);
  drafts.set_discard(2);
  drafts.mutable_speculation()->set_max_drafts(8);
  emit("stage1_drafts.pb", drafts, true);

  // One field away from valid.
  v1::StageStepRequest r = first;
  r.set_tokens(0, static_cast<int32_t>(fuzz::kNVocab));
  emit("bad_token.pb", r, false);
  r = f32;
  r.mutable_hidden()->mutable_data()->pop_back();
  emit("bad_hidden_bytes.pb", r, false);
  r = first;
  r.mutable_plan()->set_model_fingerprint("other-model");
  emit("bad_fingerprint.pb", r, false);
  r = first;
  r.mutable_plan()->mutable_stages(1)->set_first_layer(fuzz::kNLayer - 1);
  emit("bad_plan_gap.pb", r, false);
  r = last;
  r.set_position(fuzz::kContextSize - 1);
  emit("bad_position.pb", r, false);
  r = first;
  r.mutable_sampling()->set_top_p(1.5f);
  emit("bad_top_p.pb", r, false);
  r = first;
  r.set_protocol_version(1);
  emit("bad_version.pb", r, false);
  r = f16;
  r.set_wire_dtype(static_cast<v1::DType>(3));
  emit("bad_wire_dtype.pb", r, false);
  r = reuse;
  r.set_reuse_len(0);
  emit("bad_fork_without_reuse.pb", r, false);
  r = drafts;
  r.set_drafts(4);  // as many as the tokens
  emit("bad_drafts.pb", r, false);

  // Steps that omit their request's parts (the kept request's, from
  // fuzz::KeptPartsTable): a decode step, and ones the table refuses.
  auto emit_omitted = [&](const std::string& name, const v1::StageStepRequest& step,
                          absl::StatusCode code) {
    RequestPartsTable table = fuzz::KeptPartsTable();
    v1::StageStepRequest filled = step;
    absl::Status s = table.Fill(filled);
    if (s.ok()) s = ValidateStageStep(filled, limits);
    Expect(s.code() == code, name + ": " + std::string(s.message()));
    Write(dir, name, step.SerializeAsString());
  };
  v1::StageStepRequest omitted;
  omitted.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  omitted.set_request_id(std::string(fuzz::kKeptRequestId));
  omitted.set_session_id("sess-7f3a");
  omitted.set_origin(std::string(fuzz::kKeptOrigin));
  omitted.set_parts_omitted(true);
  omitted.set_stage_index(1);
  omitted.set_position(100);
  omitted.add_tokens(7);
  SetHidden(omitted, v1::DTYPE_F16);
  omitted.set_sample(true);
  omitted.set_generated(3);
  emit_omitted("parts_omitted_decode.pb", omitted, absl::StatusCode::kOk);
  r = omitted;
  r.set_constraint(R"({"type":"json_object"})");
  emit_omitted("bad_parts_omitted_but_carried.pb", r, absl::StatusCode::kInvalidArgument);
  r = omitted;
  r.set_request_id("req-unknown");
  emit_omitted("bad_parts_omitted_unknown.pb", r, absl::StatusCode::kFailedPrecondition);
  r = omitted;
  r.set_origin("node-c");
  emit_omitted("bad_parts_omitted_other_origin.pb", r, absl::StatusCode::kPermissionDenied);

  // AdoptPrefix offers (the same target checks ValidateAdoptPrefix): one at
  // the limits, and ones a field away from valid.
  auto emit_offer = [&](const std::string& name, const v1::AdoptPrefixRequest& offer, bool valid) {
    const absl::Status s = ValidateAdoptPrefix(offer, limits);
    Expect(s.ok() == valid, name + ": " + std::string(s.message()));
    Write(dir, name, offer.SerializeAsString());
  };
  v1::AdoptPrefixRequest offer;
  offer.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  offer.set_session_id("sess-7f3a");
  for (int i = 1; i <= kMaxAdoptClaims; ++i) {
    offer.add_lengths(static_cast<uint32_t>(i) * (fuzz::kContextSize - 1) / kMaxAdoptClaims);
    offer.add_digests(Sha256("prefix-" + std::to_string(i)));
  }
  emit_offer("adopt_offer_full.pb", offer, true);
  v1::AdoptPrefixRequest bad = offer;
  bad.add_lengths(fuzz::kContextSize);
  bad.add_digests(Sha256("past the limit"));
  emit_offer("bad_adopt_too_many.pb", bad, false);
  bad = offer;
  bad.set_lengths(1, bad.lengths(0));
  emit_offer("bad_adopt_not_ascending.pb", bad, false);
}

// ---- gguf_fuzzer -------------------------------------------------------------

std::string Floats(size_t n) {
  std::string out(n * 4, '\0');
  for (size_t i = 0; i < n; ++i) {
    const float f = static_cast<float>(i) * 0.125f - 1.0f;
    std::memcpy(&out[i * 4], &f, 4);
  }
  return out;
}

void Check(const absl::Status& s, const std::string& what) {
  Expect(s.ok(), what + ": " + std::string(s.message()));
}

// Writes a GGUF seed after checking how far into the loaders it gets.
enum class Reaches { kParser, kTokenizer, kModel };
void EmitGguf(const std::string& dir, const std::string& name, const std::string& bytes,
              Reaches reaches = Reaches::kParser) {
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::FromBytes(bytes);
  Expect(f.ok(), name + " parses");
  if (f.ok() && reaches != Reaches::kParser) {
    absl::StatusOr<Vocabulary> vocab = LoadVocabulary(**f);
    Check(vocab.status(), name + " vocabulary");
    if (vocab.ok()) Check(Tokenizer::Create(*std::move(vocab)).status(), name + " tokenizer");
  }
  if (f.ok() && reaches == Reaches::kModel) {
    Check(ModelConfig::FromGguf(**f).status(), name + " model config");
  }
  Write(dir, name, bytes);
}

// A llama-architecture model of width 8 with a 10-piece SentencePiece vocabulary.
GgufWriter TinyLlama() {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetString("general.name", "tiny-llama");
  w.SetUint32("llama.block_count", 1);
  w.SetUint32("llama.embedding_length", 8);
  w.SetUint32("llama.feed_forward_length", 16);
  w.SetUint32("llama.attention.head_count", 2);
  w.SetUint32("llama.attention.head_count_kv", 1);
  w.SetUint32("llama.context_length", 64);
  w.SetUint32("llama.rope.dimension_count", 4);
  w.SetFloat32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.SetFloat32("llama.rope.freq_base", 10000.0f);
  w.SetString("tokenizer.ggml.model", "llama");
  const std::vector<std::string> pieces = {"<unk>",
                                           "<s>",
                                           "</s>",
                                           "<0x0A>",
                                           "<0xE2>",
                                           "\xe2\x96\x81",
                                           "\xe2\x96\x81"
                                           "a",
                                           "a",
                                           "b",
                                           "ab"};
  w.SetStringArray("tokenizer.ggml.tokens", pieces);
  const std::vector<float> scores = {0, 0, 0, 0, 0, -1, -2, -3, -4, -5};
  w.SetFloatArray("tokenizer.ggml.scores", scores);
  const std::vector<int32_t> types = {2, 3, 3, 6, 6, 1, 1, 1, 1, 1};
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  w.SetUint32("tokenizer.ggml.bos_token_id", 1);
  w.SetUint32("tokenizer.ggml.eos_token_id", 2);
  w.SetUint32("tokenizer.ggml.unknown_token_id", 0);
  w.SetBool("tokenizer.ggml.add_bos_token", true);
  Check(w.AddTensor("token_embd.weight", {8, 10}, TensorType::kF32, Floats(80)), "token_embd");
  Check(w.AddTensor("output_norm.weight", {8}, TensorType::kF32, Floats(8)), "output_norm");
  return w;
}

// TinyLlama's vocabulary and tensors under another architecture: its
// llama.* shape keys gone, for the caller to set under `arch`.
GgufWriter TinyLlamaAs(const std::string& arch) {
  GgufWriter w = TinyLlama();
  for (const char* key :
       {"block_count", "embedding_length", "feed_forward_length", "attention.head_count",
        "attention.head_count_kv", "context_length", "rope.dimension_count",
        "attention.layer_norm_rms_epsilon", "rope.freq_base"}) {
    w.Remove(std::string("llama.") + key);
  }
  w.SetString("general.architecture", arch);
  return w;
}

// A qwen2-architecture model with a byte-level BPE vocabulary and merges.
GgufWriter TinyQwen() {
  GgufWriter w;
  w.SetString("general.architecture", "qwen2");
  w.SetUint32("qwen2.block_count", 2);
  w.SetUint32("qwen2.embedding_length", 8);
  w.SetUint32("qwen2.feed_forward_length", 8);
  w.SetUint32("qwen2.attention.head_count", 2);
  w.SetUint32("qwen2.context_length", 32);
  w.SetFloat64("qwen2.rope.freq_base", 1000000.0);
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetString("tokenizer.ggml.pre", "qwen2");
  // "\xc4\xa0" is U+0120, GPT-2's byte-level form of ' '.
  const std::vector<std::string> pieces = {"h",
                                           "e",
                                           "l",
                                           "o",
                                           "\xc4\xa0",
                                           "he",
                                           "ll",
                                           "hel",
                                           "llo",
                                           "<|endoftext|>",
                                           "<|im_start|>",
                                           "<|im_end|>"};
  w.SetStringArray("tokenizer.ggml.tokens", pieces);
  const std::vector<int32_t> types = {1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3};
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  w.SetStringArray("tokenizer.ggml.merges", {"h e", "l l", "he l", "ll o"});
  w.SetUint32("tokenizer.ggml.eos_token_id", 9);
  w.SetUint32("tokenizer.ggml.bos_token_id", 9);
  w.SetBool("tokenizer.ggml.add_bos_token", false);
  Check(
      w.AddTensor("token_embd.weight", {8, 12}, TensorType::kF16, std::string(8 * 12 * 2, '\x3c')),
      "token_embd");
  return w;
}

// Every value type, nested arrays, a non-default alignment and quantized tensors.
GgufWriter AllTypes() {
  GgufWriter w;
  Check(w.SetAlignment(64), "alignment");
  w.SetUint8("t.u8", 0xff);
  w.SetInt8("t.i8", -128);
  w.SetUint16("t.u16", 0xffff);
  w.SetInt16("t.i16", -1);
  w.SetUint32("t.u32", 0xffffffffu);
  w.SetInt32("t.i32", INT32_MIN);
  w.SetUint64("t.u64", UINT64_MAX);
  w.SetInt64("t.i64", INT64_MIN);
  w.SetFloat32("t.f32", -0.0f);
  w.SetFloat64("t.f64", std::numeric_limits<double>::infinity());
  w.SetBool("t.bool", true);
  w.SetString("t.string", "h\xc3\xa9llo\n");
  w.SetStringArray("t.strings", {"", "a", "\xff\xfe"});
  const std::vector<uint8_t> u8 = {0, 1, 255};
  w.SetUint8Array("t.u8s", u8);
  const std::vector<int16_t> i16 = {-1, 0, 1};
  w.SetInt16Array("t.i16s", i16);
  const std::vector<uint64_t> u64 = {UINT64_MAX, 0};
  w.SetUint64Array("t.u64s", u64);
  const std::vector<double> f64 = {1.5, -2.25};
  w.SetFloat64Array("t.f64s", f64);
  w.SetBoolArray("t.bools", {true, false});
  // [[1, 2], []] as an array of u32 arrays: element type 9, count 2, then
  // each element as (element type, count, payload).
  std::string nested;
  auto le = [&nested](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) nested.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  le(9, 4), le(2, 8);
  le(4, 4), le(2, 8), le(1, 4), le(2, 4);
  le(4, 4), le(0, 8);
  w.SetRaw("t.nested", 9, nested);
  Check(w.AddTensor("a.f32", {4}, TensorType::kF32, Floats(4)), "a.f32");
  Check(w.AddTensor("b.f16", {2, 3}, TensorType::kF16, std::string(12, '\x01')), "b.f16");
  Check(w.AddTensor("c.q8_0", {32, 2}, TensorType::kQ8_0, std::string(2 * 34, '\x02')), "c.q8_0");
  Check(w.AddTensor("d.q4_K", {256}, TensorType::kQ4_K, std::string(144, '\x03')), "d.q4_K");
  return w;
}

// stories260K's own metadata (tokenizer arrays cut to 64 pieces) with one
// small tensor, so the seed keeps real keys without the 1 MB of weights.
bool StoriesMeta(const std::string& model_path, GgufWriter* w) {
  absl::StatusOr<std::unique_ptr<GgufFile>> f = GgufFile::Open(model_path);
  if (!f.ok()) {
    std::fprintf(stderr, "skipping stories_meta.gguf: %s\n",
                 std::string(f.status().message()).c_str());
    return false;
  }
  constexpr size_t kPieces = 64;
  for (const auto& [key, value] : (*f)->metadata()) {
    if (value.type() == GgufValueType::kArray && value.array_size() > kPieces) {
      if (value.array_type() == GgufValueType::kString) {
        std::vector<std::string> cut;
        for (uint64_t i = 0; i < kPieces; ++i) cut.emplace_back(value.array_element(i).AsString());
        w->SetStringArray(key, cut);
      } else if (value.array_type() == GgufValueType::kFloat32) {
        std::vector<float> cut;
        for (uint64_t i = 0; i < kPieces; ++i)
          cut.push_back(static_cast<float>(value.array_element(i).AsDouble()));
        w->SetFloatArray(key, cut);
      } else if (value.array_type() == GgufValueType::kInt32) {
        std::vector<int32_t> cut;
        for (uint64_t i = 0; i < kPieces; ++i)
          cut.push_back(static_cast<int32_t>(value.array_element(i).AsInt64()));
        w->SetInt32Array(key, cut);
      }
      continue;
    }
    w->SetValue(key, value);
  }
  Check(w->AddTensor("token_embd.weight", {64, 4}, TensorType::kQ8_0,
                     std::string(4 * 2 * 34, '\x04')),
        "stories token_embd");
  return true;
}

void WriteGgufs(const std::string& dir, const std::string& model_path) {
  GgufWriter empty;
  EmitGguf(dir, "empty.gguf", empty.ToBytes());
  const std::string llama = TinyLlama().ToBytes();
  EmitGguf(dir, "tiny_llama.gguf", llama, Reaches::kModel);
  // The same file as GGUF version 2 (same layout as v3).
  std::string v2 = llama;
  v2[4] = 2;
  EmitGguf(dir, "tiny_llama_v2.gguf", v2, Reaches::kModel);
  EmitGguf(dir, "tiny_qwen2_bpe.gguf", TinyQwen().ToBytes(), Reaches::kModel);
  EmitGguf(dir, "all_types.gguf", AllTypes().ToBytes());
  // Experts (Mixtral's keys on llama): a valid header, then counts that
  // disagree (more used than exist; more than llama.cpp's 256).
  GgufWriter mixtral = TinyLlama();
  mixtral.SetUint32("llama.expert_count", 4);
  mixtral.SetUint32("llama.expert_used_count", 2);
  EmitGguf(dir, "tiny_mixtral.gguf", mixtral.ToBytes(), Reaches::kModel);
  mixtral.SetUint32("llama.expert_used_count", 5);
  EmitGguf(dir, "mixtral_used_over_count.gguf", mixtral.ToBytes(), Reaches::kTokenizer);
  mixtral.SetUint32("llama.expert_count", 100000);
  EmitGguf(dir, "mixtral_too_many_experts.gguf", mixtral.ToBytes(), Reaches::kTokenizer);
  // Qwen 3: heads of 8 where n_embd / n_head is 4; then qwen3moe without
  // its (required) expert count.
  for (const std::string arch : {"qwen3", "qwen3moe"}) {
    GgufWriter w = TinyLlamaAs(arch);
    const std::string a = arch + ".";
    w.SetUint32(a + "block_count", 1);
    w.SetUint32(a + "embedding_length", 8);
    w.SetUint32(a + "feed_forward_length", 16);
    w.SetUint32(a + "attention.head_count", 2);
    w.SetUint32(a + "attention.head_count_kv", 1);
    w.SetUint32(a + "attention.key_length", 8);
    w.SetUint32(a + "attention.value_length", 8);
    w.SetUint32(a + "context_length", 64);
    if (arch == "qwen3") {
      EmitGguf(dir, "tiny_qwen3.gguf", w.ToBytes(), Reaches::kModel);
    } else {
      EmitGguf(dir, "qwen3moe_no_expert_count.gguf", w.ToBytes(), Reaches::kTokenizer);
    }
  }
  // Phi-3: fused attn_qkv and ffn_up and LongRoPE factors (a valid header
  // and tensors); one attn_qkv a row short, which the weights' load names;
  // and a header without its (required) sliding window.
  {
    GgufWriter w = TinyLlamaAs("phi3");
    w.SetUint32("phi3.block_count", 1);
    w.SetUint32("phi3.embedding_length", 8);
    w.SetUint32("phi3.feed_forward_length", 16);
    w.SetUint32("phi3.attention.head_count", 2);
    w.SetUint32("phi3.attention.head_count_kv", 2);
    w.SetUint32("phi3.context_length", 64);
    w.SetUint32("phi3.rope.dimension_count", 4);
    w.SetFloat32("phi3.attention.layer_norm_rms_epsilon", 1e-5f);
    w.SetUint32("phi3.attention.sliding_window", 16);
    w.SetFloat32("phi3.rope.scaling.attn_factor", 1.19f);
    w.SetUint32("phi3.rope.scaling.original_context_length", 32);
    Check(w.AddTensor("rope_factors_long.weight", {2}, TensorType::kF32, Floats(2)), "long");
    Check(w.AddTensor("rope_factors_short.weight", {2}, TensorType::kF32, Floats(2)), "short");
    Check(w.AddTensor("blk.0.attn_norm.weight", {8}, TensorType::kF32, Floats(8)), "attn_norm");
    Check(w.AddTensor("blk.0.attn_output.weight", {8, 8}, TensorType::kF32, Floats(64)), "wo");
    Check(w.AddTensor("blk.0.ffn_norm.weight", {8}, TensorType::kF32, Floats(8)), "ffn_norm");
    Check(w.AddTensor("blk.0.ffn_up.weight", {8, 32}, TensorType::kF32, Floats(256)), "ffn_up");
    Check(w.AddTensor("blk.0.ffn_down.weight", {16, 8}, TensorType::kF32, Floats(128)), "down");
    Check(w.AddTensor("output.weight", {8, 10}, TensorType::kF32, Floats(80)), "output");
    GgufWriter bad = w;
    Check(w.AddTensor("blk.0.attn_qkv.weight", {8, 24}, TensorType::kF32, Floats(192)), "qkv");
    EmitGguf(dir, "tiny_phi3.gguf", w.ToBytes(), Reaches::kModel);
    Check(bad.AddTensor("blk.0.attn_qkv.weight", {8, 23}, TensorType::kF32, Floats(184)), "qkv");
    EmitGguf(dir, "phi3_qkv_row_short.gguf", bad.ToBytes(), Reaches::kModel);
    w.Remove("phi3.attention.sliding_window");
    EmitGguf(dir, "phi3_no_window.gguf", w.ToBytes(), Reaches::kTokenizer);
  }
  // DeepSeek (deepseek2): MLA with q LoRA and YaRN, a dense first layer,
  // experts with a shared one (a valid header and the first layer's
  // attention tensors); then a latent rank that disagrees with
  // attn_kv_a_mqa's rows, which the weights' load names; and a header with
  // fewer KV heads than heads, which MLA cannot have.
  {
    GgufWriter w = TinyLlamaAs("deepseek2");
    const std::string a = "deepseek2.";
    w.SetUint32(a + "block_count", 2);
    w.SetUint32(a + "embedding_length", 8);
    w.SetUint32(a + "feed_forward_length", 16);
    w.SetUint32(a + "attention.head_count", 2);
    w.SetUint32(a + "attention.head_count_kv", 2);
    w.SetUint32(a + "attention.key_length", 6);
    w.SetUint32(a + "attention.value_length", 4);
    w.SetUint32(a + "rope.dimension_count", 2);
    w.SetUint32(a + "context_length", 64);
    w.SetUint32(a + "leading_dense_block_count", 1);
    w.SetUint32(a + "attention.q_lora_rank", 4);
    w.SetUint32(a + "attention.kv_lora_rank", 4);
    w.SetUint32(a + "expert_count", 4);
    w.SetUint32(a + "expert_used_count", 2);
    w.SetUint32(a + "expert_feed_forward_length", 8);
    w.SetUint32(a + "expert_shared_count", 1);
    w.SetFloat32(a + "expert_weights_scale", 2.5f);
    w.SetBool(a + "expert_weights_norm", true);
    w.SetUint32(a + "expert_gating_func", 2);
    w.SetString(a + "rope.scaling.type", "yarn");
    w.SetFloat32(a + "rope.scaling.factor", 4.0f);
    w.SetUint32(a + "rope.scaling.original_context_length", 16);
    w.SetFloat32(a + "rope.scaling.yarn_log_multiplier", 0.1f);
    Check(w.AddTensor("blk.0.attn_norm.weight", {8}, TensorType::kF32, Floats(8)), "attn_norm");
    Check(w.AddTensor("blk.0.attn_q_a.weight", {8, 4}, TensorType::kF32, Floats(32)), "q_a");
    Check(w.AddTensor("blk.0.attn_q_a_norm.weight", {4}, TensorType::kF32, Floats(4)), "q_a_n");
    Check(w.AddTensor("blk.0.attn_q_b.weight", {4, 12}, TensorType::kF32, Floats(48)), "q_b");
    Check(w.AddTensor("blk.0.attn_kv_a_norm.weight", {4}, TensorType::kF32, Floats(4)), "kv_a_n");
    Check(w.AddTensor("blk.0.attn_kv_b.weight", {4, 16}, TensorType::kF32, Floats(64)), "kv_b");
    Check(w.AddTensor("blk.0.attn_output.weight", {8, 8}, TensorType::kF32, Floats(64)), "wo");
    GgufWriter bad = w;
    Check(w.AddTensor("blk.0.attn_kv_a_mqa.weight", {8, 6}, TensorType::kF32, Floats(48)), "kv_a");
    EmitGguf(dir, "tiny_deepseek2.gguf", w.ToBytes(), Reaches::kModel);
    Check(bad.AddTensor("blk.0.attn_kv_a_mqa.weight", {8, 5}, TensorType::kF32, Floats(40)),
          "kv_a");
    EmitGguf(dir, "deepseek2_kv_rank_mismatch.gguf", bad.ToBytes(), Reaches::kModel);
    w.SetUint32(a + "attention.head_count_kv", 1);
    EmitGguf(dir, "deepseek2_kv_heads_differ.gguf", w.ToBytes(), Reaches::kTokenizer);
  }
  GgufWriter stories;
  if (StoriesMeta(model_path, &stories)) {
    const std::string bytes = stories.ToBytes();
    EmitGguf(dir, "stories_meta.gguf", bytes, Reaches::kModel);
    Write(dir, "stories_meta_truncated.gguf", bytes.substr(0, 300));
  }
}

}  // namespace
}  // namespace ringlm

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR [STORIES_GGUF]\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1];
  const std::string model = argc > 2 ? argv[2] : RINGLM_FUZZ_DEFAULT_MODEL;
  ::mkdir(out.c_str(), 0755);
  ringlm::WriteAnnouncements(out + "/announcement_fuzzer");
  ringlm::WriteSteps(out + "/stage_step_fuzzer");
  ringlm::WriteGgufs(out + "/gguf_fuzzer", model);
  if (ringlm::g_errors != 0) {
    std::fprintf(stderr, "%d errors\n", ringlm::g_errors);
    return 1;
  }
  return 0;
}
