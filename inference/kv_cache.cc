#include "inference/kv_cache.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"

namespace ringlm {

// One block's rows: [layer][key, value][slot][n_embd_kv]. Counted in its
// ledger from allocation to the release of its last reference.
struct KvCache::Block {
  Block(size_t values, std::shared_ptr<KvBlockLedger> l)
      : data(std::make_unique_for_overwrite<uint16_t[]>(values)),
        bytes(values * sizeof(uint16_t)),
        ledger(std::move(l)) {
    ledger->Add(bytes);
  }
  ~Block() { ledger->Remove(bytes); }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  std::unique_ptr<uint16_t[]> data;
  uint64_t bytes;
  std::shared_ptr<KvBlockLedger> ledger;
};

KvCache::KvCache(uint32_t n_layers, uint32_t n_embd_kv, uint32_t max_positions,
                 uint32_t first_layer, std::shared_ptr<KvBlockLedger> ledger)
    : n_layers_(n_layers),
      first_layer_(first_layer),
      n_embd_kv_(n_embd_kv),
      max_positions_(max_positions),
      ledger_(ledger ? std::move(ledger) : std::make_shared<KvBlockLedger>()) {}

KvCache::~KvCache() = default;

void KvCache::UseLedger(std::shared_ptr<KvBlockLedger> ledger) {
  assert(blocks_.empty() && ledger != nullptr);
  ledger_ = std::move(ledger);
}

std::shared_ptr<KvCache::Block> KvCache::NewBlock() const {
  return std::make_shared<Block>(size_t{n_layers_} * 2 * kKvBlockTokens * n_embd_kv_, ledger_);
}

uint16_t* KvCache::Row(uint32_t layer, uint32_t pos, int kv) const {
  const Block& block = *blocks_[pos / kKvBlockTokens];
  const size_t slot = pos % kKvBlockTokens;
  return &block.data[((size_t{layer} * 2 + kv) * kKvBlockTokens + slot) * n_embd_kv_];
}

KvCache KvCache::Fork(uint32_t n) const {
  n = std::min(n, n_positions());
  KvCache fork(n_layers_, n_embd_kv_, max_positions_, first_layer_, ledger_);
  const uint32_t whole = n / kKvBlockTokens;
  fork.blocks_.assign(blocks_.begin(), blocks_.begin() + whole);
  if (const uint32_t rows = n % kKvBlockTokens; rows > 0) {
    // Only the kept rows: the rest of this block may be written meanwhile
    // by the cache's own owner.
    fork.blocks_.push_back(fork.NewBlock());
    const uint32_t first = whole * kKvBlockTokens;
    for (uint32_t l = 0; l < n_layers_; ++l) {
      std::copy_n(key(l, first), size_t{rows} * n_embd_kv_, fork.key(l, first));
      std::copy_n(value(l, first), size_t{rows} * n_embd_kv_, fork.value(l, first));
    }
  }
  fork.tokens_.assign(tokens_.begin(), tokens_.begin() + n);
  return fork;
}

absl::Status KvCache::Reserve(uint32_t n_new) {
  const uint64_t needed = uint64_t{n_positions()} + n_new;
  if (needed > max_positions_) {
    return absl::ResourceExhaustedError(absl::StrCat("context is full: ", n_positions(),
                                                     " positions held + ", n_new,
                                                     " new > context size ", max_positions_));
  }
  if (n_new == 0) return absl::OkStatus();
  const uint32_t held = n_positions();
  // A shared block the new positions fall in becomes this cache's own copy
  // (its rows below `held`); later blocks are new.
  if (const size_t b = held / kKvBlockTokens; b < blocks_.size() && blocks_[b].use_count() > 1) {
    std::shared_ptr<Block> own = NewBlock();
    const uint32_t first = static_cast<uint32_t>(b) * kKvBlockTokens;
    const size_t count = size_t{held - first} * n_embd_kv_;
    for (uint32_t l = 0; l < n_layers_; ++l) {
      for (int kv = 0; kv < 2; ++kv) {
        const size_t offset = (size_t{l} * 2 + kv) * kKvBlockTokens * n_embd_kv_;
        std::copy_n(&blocks_[b]->data[offset], count, &own->data[offset]);
      }
    }
    blocks_[b] = std::move(own);
  }
  const size_t blocks_needed = (needed + kKvBlockTokens - 1) / kKvBlockTokens;
  while (blocks_.size() < blocks_needed) blocks_.push_back(NewBlock());
  return absl::OkStatus();
}

void KvCache::Commit(const int32_t* tokens, uint32_t n) {
  tokens_.insert(tokens_.end(), tokens, tokens + n);
}

void KvCache::Truncate(uint32_t n) {
  if (n >= tokens_.size()) return;
  tokens_.resize(n);
  blocks_.resize((n + kKvBlockTokens - 1) / kKvBlockTokens);
}

}  // namespace ringlm
