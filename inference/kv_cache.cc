#include "inference/kv_cache.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"

namespace ringlm {

// One block's rows: [layer][16 key rows, 16 value rows]. Counted in its
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

KvCache::KvCache(uint32_t n_layers, KvWidths widths, uint32_t max_positions, uint32_t first_layer,
                 std::shared_ptr<KvBlockLedger> ledger)
    : n_layers_(n_layers),
      first_layer_(first_layer),
      widths_(widths),
      max_positions_(max_positions),
      ledger_(ledger ? std::move(ledger) : std::make_shared<KvBlockLedger>()) {}

KvCache::~KvCache() = default;

void KvCache::UseLedger(std::shared_ptr<KvBlockLedger> ledger) {
  assert(blocks_.empty() && ledger != nullptr);
  ledger_ = std::move(ledger);
}

std::shared_ptr<KvCache::Block> KvCache::NewBlock() const {
  return std::make_shared<Block>(
      size_t{n_layers_} * kKvBlockTokens * (size_t{widths_.key} + widths_.value), ledger_);
}

std::shared_ptr<KvCache::Block> KvCache::CopyOfRows(const Block& from, uint32_t rows) const {
  // Only the first `rows` of each layer's keys and values: the rest of the
  // block may be written meanwhile by the cache that owns it.
  std::shared_ptr<Block> copy = NewBlock();
  const size_t layer_values = kKvBlockTokens * (size_t{widths_.key} + widths_.value);
  for (size_t layer = 0; layer < n_layers_; ++layer) {
    const size_t keys = layer * layer_values;
    const size_t values = keys + kKvBlockTokens * size_t{widths_.key};
    std::copy_n(&from.data[keys], size_t{rows} * widths_.key, &copy->data[keys]);
    std::copy_n(&from.data[values], size_t{rows} * widths_.value, &copy->data[values]);
  }
  return copy;
}

uint16_t* KvCache::Row(uint32_t layer, uint32_t pos, int kv) const {
  const Block& block = *blocks_[pos / kKvBlockTokens];
  const size_t slot = pos % kKvBlockTokens;
  size_t offset = size_t{layer} * kKvBlockTokens * (size_t{widths_.key} + widths_.value);
  if (kv == 0) return &block.data[offset + slot * widths_.key];
  offset += kKvBlockTokens * size_t{widths_.key};
  return &block.data[offset + slot * widths_.value];
}

KvCache KvCache::Fork(uint32_t n) const {
  n = std::min(n, n_positions());
  KvCache fork(n_layers_, widths_, max_positions_, first_layer_, ledger_);
  const uint32_t whole = n / kKvBlockTokens;
  fork.blocks_.assign(blocks_.begin(), blocks_.begin() + whole);
  if (const uint32_t rows = n % kKvBlockTokens; rows > 0) {
    fork.blocks_.push_back(CopyOfRows(*blocks_[whole], rows));
  }
  fork.tokens_.assign(tokens_.begin(), tokens_.begin() + n);
  fork.rounded_inputs_ = rounded_inputs_ && n > 0;
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
    blocks_[b] = CopyOfRows(*blocks_[b], held % kKvBlockTokens);
  }
  const size_t blocks_needed = (needed + kKvBlockTokens - 1) / kKvBlockTokens;
  while (blocks_.size() < blocks_needed) blocks_.push_back(NewBlock());
  return absl::OkStatus();
}

void KvCache::Commit(const int32_t* tokens, uint32_t n) {
  tokens_.insert(tokens_.end(), tokens, tokens + n);
}

void KvCache::Truncate(uint32_t n) {
  if (n == 0) rounded_inputs_ = false;
  if (n >= tokens_.size()) return;
  tokens_.resize(n);
  blocks_.resize((n + kKvBlockTokens - 1) / kKvBlockTokens);
}

}  // namespace ringlm
