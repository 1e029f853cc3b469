// The key/value cache of one session on one stage.
#ifndef RINGLM_INFERENCE_KV_CACHE_H_
#define RINGLM_INFERENCE_KV_CACHE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace ringlm {

// Keys and values (f16, as llama.cpp stores them) for `n_layers` consecutive
// layers from model layer `first_layer`, at positions [0, n_positions()),
// together with the token id at each position, so a stage always knows
// exactly which layers and which prefix it holds.
//
// Storage grows geometrically up to `max_positions` (the context size); it is
// never shared, and copying is explicit (`Clone`). Not thread-safe: one
// forward pass at a time, enforced by the owner.
class KvCache {
 public:
  KvCache(uint32_t n_layers, uint32_t n_embd_kv, uint32_t max_positions, uint32_t first_layer = 0);
  KvCache(KvCache&&) = default;
  KvCache& operator=(KvCache&&) = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // A new cache holding a copy of the first `n` positions (n <= n_positions).
  KvCache Clone(uint32_t n) const;

  uint32_t n_positions() const { return static_cast<uint32_t>(tokens_.size()); }
  uint32_t max_positions() const { return max_positions_; }
  uint32_t n_layers() const { return n_layers_; }
  uint32_t first_layer() const { return first_layer_; }
  // True when the cache holds exactly the layers [first, last).
  bool Holds(uint32_t first, uint32_t last) const {
    return first_layer_ == first && first + n_layers_ == last;
  }
  const std::vector<int32_t>& tokens() const { return tokens_; }

  // Makes room for `n_new` more positions. ResourceExhausted when that would
  // pass the context size; the cache is unchanged then.
  absl::Status Reserve(uint32_t n_new);
  // Records the tokens of positions just written by a forward pass.
  // Precondition: Reserve(tokens.size()) succeeded and the K/V rows of those
  // positions were written.
  void Commit(const int32_t* tokens, uint32_t n);
  // Forgets every position >= n (n <= n_positions). Keeps the allocation.
  void Truncate(uint32_t n);

  // Row of `n_embd_kv` f16 values; `layer` is relative to the stage's first
  // layer. Valid for pos < capacity (after Reserve).
  uint16_t* key(uint32_t layer, uint32_t pos) { return &keys_[layer][size_t{pos} * n_embd_kv_]; }
  uint16_t* value(uint32_t layer, uint32_t pos) {
    return &values_[layer][size_t{pos} * n_embd_kv_];
  }
  const uint16_t* key(uint32_t layer, uint32_t pos) const {
    return &keys_[layer][size_t{pos} * n_embd_kv_];
  }
  const uint16_t* value(uint32_t layer, uint32_t pos) const {
    return &values_[layer][size_t{pos} * n_embd_kv_];
  }

  // Bytes one position costs across this stage's layers.
  uint64_t bytes_per_token() const { return uint64_t{n_layers_} * n_embd_kv_ * 2 * 2; }
  // Bytes currently allocated.
  uint64_t allocated_bytes() const { return uint64_t{capacity_} * bytes_per_token(); }

 private:
  void Grow(uint32_t capacity);

  uint32_t n_layers_;
  uint32_t first_layer_;
  uint32_t n_embd_kv_;
  uint32_t max_positions_;
  uint32_t capacity_ = 0;
  std::vector<std::vector<uint16_t>> keys_;    // [layer][pos * n_embd_kv]
  std::vector<std::vector<uint16_t>> values_;  // [layer][pos * n_embd_kv]
  std::vector<int32_t> tokens_;                // [pos]
};

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_KV_CACHE_H_
