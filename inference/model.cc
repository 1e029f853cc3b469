#include "inference/model.h"

#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "inference/vocabulary_loader.h"

namespace ringlm {
namespace {

constexpr uint32_t kMaxContext = 1u << 20;

// FNV-1a, 64-bit: enough to tell different models apart on a LAN; it is a
// label, not a security check.
class Fnv64 {
 public:
  void Add(std::string_view bytes) {
    for (unsigned char ch : bytes) {
      hash_ ^= ch;
      hash_ *= 0x100000001b3ULL;
    }
  }
  void Add(uint64_t v) { Add(std::string_view(reinterpret_cast<const char*>(&v), sizeof(v))); }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

std::string Fingerprint(const GgufFile& file, const ModelConfig& config) {
  // The size and the whole header (metadata and tensor table): what a node
  // holding only some tensors has too. Two quantizations of one model
  // differ in their tensor tables; two fine-tunes of one base in their
  // metadata (general.name and the like).
  Fnv64 h;
  h.Add(file.file_size());
  h.Add(file.header_bytes());
  return absl::StrFormat("%s-%dL-%016x", config.architecture, config.n_layer, h.value());
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path,
                                                   const ModelOptions& options) {
  std::unique_ptr<Model> m(new Model());
  m->path_ = path;
  RINGLM_ASSIGN_OR_RETURN(m->file_, GgufFile::Open(path));
  RINGLM_ASSIGN_OR_RETURN(m->config_, ModelConfig::FromGguf(*m->file_));
  RINGLM_ASSIGN_OR_RETURN(Vocabulary vocab, LoadVocabulary(*m->file_));
  if (vocab.pieces.size() != m->config_.n_vocab) {
    return absl::InvalidArgumentError(absl::StrCat("the tokenizer has ", vocab.pieces.size(),
                                                   " tokens but token_embd.weight has ",
                                                   m->config_.n_vocab, " rows"));
  }
  RINGLM_ASSIGN_OR_RETURN(m->tokenizer_, Tokenizer::Create(std::move(vocab)));
  const LayerRange range = options.layers.value_or(LayerRange{0, m->config_.n_layer});
  if (range.size() > 0) {
    RINGLM_ASSIGN_OR_RETURN(m->weights_, StageWeights::Load(*m->file_, m->config_, range));
  }
  m->context_size_ = options.context_size == 0 ? m->config_.n_ctx_train : options.context_size;
  if (m->context_size_ > kMaxContext) {
    return absl::InvalidArgumentError(
        absl::StrCat("context size ", m->context_size_, " is above the limit of ", kMaxContext));
  }
  m->fingerprint_ = Fingerprint(*m->file_, m->config_);
  return m;
}

void Model::Release(const StageWeights& old, const StageWeights* keep) const {
  for (const GgufTensorInfo* t : old.tensors()) {
    bool kept = false;
    if (keep != nullptr) {
      for (const GgufTensorInfo* k : keep->tensors()) kept = kept || k == t;
    }
    if (!kept) file_->Release(*t);
  }
}

absl::Status Model::Pack(StageWeights& weights, const LoadProgress& progress) const {
  // Each tensor's pages go as soon as it is copied, so packing a stage
  // never holds much more than the stage.
  return weights.Pack(*packed_, progress, [this](const GgufTensorInfo& t) { file_->Release(t); });
}

absl::Status Model::LoadIntoMemory(const LoadProgress& progress) {
  uint64_t packed = 0;
  LoadProgress pack_progress;
  if (progress) {
    pack_progress = [&](uint64_t done, uint64_t) {
      packed = done;
      progress(done, weights_->bytes());
    };
  }
  RINGLM_RETURN_IF_ERROR(Pack(*weights_, pack_progress));
  PageIn(*weights_, progress ? LoadProgress([&](uint64_t done, uint64_t) {
    progress(std::min(packed + done, weights_->bytes()), weights_->bytes());
  })
                             : LoadProgress());
  return absl::OkStatus();
}

void Model::PageIn(const StageWeights& weights, const LoadProgress& progress) const {
  uint64_t total = 0;
  for (const GgufTensorInfo* t : weights.mapped_tensors()) total += t->n_bytes;
  const long page = sysconf(_SC_PAGESIZE);
  uint64_t done = 0;
  uint64_t next_report = 0;
  volatile uint8_t sink = 0;
  for (const GgufTensorInfo* t : weights.mapped_tensors()) {
    file_->Prefetch(*t);
    for (uint64_t off = 0; off < t->n_bytes; off += page) {
      sink = sink + t->data[off];
      done += std::min<uint64_t>(page, t->n_bytes - off);
      if (progress && done >= next_report) {
        progress(done, total);
        next_report = done + total / 100;
      }
    }
  }
  if (progress) progress(total, total);
}

}  // namespace ringlm
