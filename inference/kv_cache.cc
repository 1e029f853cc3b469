#include "inference/kv_cache.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringlm {
namespace {
constexpr uint32_t kMinCapacity = 64;
}  // namespace

KvCache::KvCache(uint32_t n_layers, uint32_t n_embd_kv, uint32_t max_positions,
                 uint32_t first_layer)
    : n_layers_(n_layers),
      first_layer_(first_layer),
      n_embd_kv_(n_embd_kv),
      max_positions_(max_positions),
      keys_(n_layers),
      values_(n_layers) {}

KvCache KvCache::Clone(uint32_t n) const {
  n = std::min(n, n_positions());
  KvCache copy(n_layers_, n_embd_kv_, max_positions_, first_layer_);
  copy.Grow(std::max(n, std::min(kMinCapacity, max_positions_)));
  const size_t count = size_t{n} * n_embd_kv_;
  for (uint32_t l = 0; l < n_layers_; ++l) {
    std::copy_n(keys_[l].begin(), count, copy.keys_[l].begin());
    std::copy_n(values_[l].begin(), count, copy.values_[l].begin());
  }
  copy.tokens_.assign(tokens_.begin(), tokens_.begin() + n);
  return copy;
}

absl::Status KvCache::Reserve(uint32_t n_new) {
  const uint64_t needed = uint64_t{n_positions()} + n_new;
  if (needed > max_positions_) {
    return absl::ResourceExhaustedError(absl::StrCat("context is full: ", n_positions(),
                                                     " positions held + ", n_new,
                                                     " new > context size ", max_positions_));
  }
  if (needed > capacity_) {
    const uint64_t doubled = std::max<uint64_t>(uint64_t{capacity_} * 2, kMinCapacity);
    Grow(static_cast<uint32_t>(std::min<uint64_t>(std::max(doubled, needed), max_positions_)));
  }
  return absl::OkStatus();
}

void KvCache::Commit(const int32_t* tokens, uint32_t n) {
  tokens_.insert(tokens_.end(), tokens, tokens + n);
}

void KvCache::Truncate(uint32_t n) {
  if (n < tokens_.size()) tokens_.resize(n);
}

void KvCache::Grow(uint32_t capacity) {
  capacity_ = capacity;
  const size_t count = size_t{capacity} * n_embd_kv_;
  for (uint32_t l = 0; l < n_layers_; ++l) {
    keys_[l].resize(count);
    values_[l].resize(count);
  }
}

}  // namespace ringlm
