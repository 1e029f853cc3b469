// The key/value cache of one session on one stage, in shared fixed-size blocks.
#ifndef RINGLM_INFERENCE_KV_CACHE_H_
#define RINGLM_INFERENCE_KV_CACHE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace ringlm {

// Positions per KV block. A fork shares every whole block of the prefix it
// keeps and copies only a partly filled last one.
inline constexpr uint32_t kKvBlockTokens = 16;

// Counts the bytes of the KV blocks alive among the caches that share it,
// each block once however many caches refer to it. Thread-safe.
class KvBlockLedger {
 public:
  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  uint64_t blocks() const { return blocks_.load(std::memory_order_relaxed); }
  void Add(uint64_t bytes) {
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
    blocks_.fetch_add(1, std::memory_order_relaxed);
  }
  void Remove(uint64_t bytes) {
    bytes_.fetch_sub(bytes, std::memory_order_relaxed);
    blocks_.fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> blocks_{0};
};

// The row widths of a cache: keys and values per position and layer, in
// f16 values. They differ only for DeepSeek's MLA (heads of 192 key and 128
// value values).
struct KvWidths {
  uint32_t key = 0;
  uint32_t value = 0;
};

// Keys and values (f16, as llama.cpp stores them) for `n_layers` consecutive
// layers from model layer `first_layer`, at positions [0, n_positions()),
// together with the token id at each position, so a stage always knows
// exactly which layers and which prefix it holds.
//
// Storage is a table of blocks of kKvBlockTokens positions, reference
// counted: `Fork` shares blocks between caches, and a cache copies a shared
// block before it writes into it (in `Reserve`), so no cache ever sees
// another's writes. A block of positions [16b, 16b + 16) holds, per layer,
// the 16 key rows and then the 16 value rows, `widths.key` and
// `widths.value` long (both n_embd_kv by default), so a block's key rows of
// one layer are contiguous with stride widths.key, and its value rows with
// stride widths.value.
//
// Not thread-safe: one forward pass at a time, enforced by the owner. Two
// caches that share blocks may be used from two threads at once.
class KvCache {
 public:
  // `ledger` counts this cache's blocks, and its forks'; null gives the
  // cache a ledger of its own.
  KvCache(uint32_t n_layers, uint32_t n_embd_kv, uint32_t max_positions, uint32_t first_layer = 0,
          std::shared_ptr<KvBlockLedger> ledger = nullptr)
      : KvCache(n_layers, KvWidths{n_embd_kv, n_embd_kv}, max_positions, first_layer,
                std::move(ledger)) {}
  KvCache(uint32_t n_layers, KvWidths widths, uint32_t max_positions, uint32_t first_layer = 0,
          std::shared_ptr<KvBlockLedger> ledger = nullptr);
  KvCache(KvCache&&) = default;
  KvCache& operator=(KvCache&&) = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;
  ~KvCache();

  // A new cache holding the first `n` positions (n <= n_positions): it
  // shares the whole blocks and copies the rows of a partly kept last one.
  KvCache Fork(uint32_t n) const;
  // Moves this cache's counting to `ledger`. Precondition: no blocks held.
  void UseLedger(std::shared_ptr<KvBlockLedger> ledger);
  const std::shared_ptr<KvBlockLedger>& ledger() const { return ledger_; }

  uint32_t n_positions() const { return static_cast<uint32_t>(tokens_.size()); }
  uint32_t max_positions() const { return max_positions_; }
  uint32_t n_layers() const { return n_layers_; }
  uint32_t first_layer() const { return first_layer_; }
  // True when the cache holds exactly the layers [first, last).
  bool Holds(uint32_t first, uint32_t last) const {
    return first_layer_ == first && first + n_layers_ == last;
  }
  const std::vector<int32_t>& tokens() const { return tokens_; }

  // Makes room for `n_new` more positions: allocates blocks, and copies any
  // shared block those positions fall in. ResourceExhausted when that would
  // pass the context size; the cache is unchanged then.
  absl::Status Reserve(uint32_t n_new);
  // Records the tokens of positions just written by a forward pass.
  // Precondition: Reserve(tokens.size()) succeeded and the K/V rows of those
  // positions were written.
  void Commit(const int32_t* tokens, uint32_t n);
  // Forgets every position >= n (n <= n_positions), and the blocks past it.
  void Truncate(uint32_t n);
  // Some position was computed from inputs rounded on the way (hidden
  // states sent as F16): its KV is not what an F32 run computes, so only a
  // request of the same kind may reuse it. Forks keep the mark; an empty
  // cache (Truncate(0)) drops it.
  void MarkRoundedInputs() { rounded_inputs_ = true; }
  bool rounded_inputs() const { return rounded_inputs_; }
  // The label its user gave the last writer of its positions (a stage runs
  // several requests on one conversation's cache, one after another): so a
  // late correction meant for one writer is not applied to the next. 0 =
  // none; a fork starts with none.
  void set_writer(uint64_t writer) { writer_ = writer; }
  uint64_t writer() const { return writer_; }

  // Row of `widths().key` (or `.value`) f16 values; `layer` is relative to
  // the stage's first layer. Valid for positions Reserve made room for. Rows
  // of positions in one block are contiguous (stride the row's width); see
  // `RunLength`.
  uint16_t* key(uint32_t layer, uint32_t pos) { return Row(layer, pos, 0); }
  uint16_t* value(uint32_t layer, uint32_t pos) { return Row(layer, pos, 1); }
  const uint16_t* key(uint32_t layer, uint32_t pos) const { return Row(layer, pos, 0); }
  const uint16_t* value(uint32_t layer, uint32_t pos) const { return Row(layer, pos, 1); }
  // How many positions from `pos` on, up to `end`, lie in pos's block.
  static uint32_t RunLength(uint32_t pos, uint32_t end) {
    const uint32_t block_end = (pos / kKvBlockTokens + 1) * kKvBlockTokens;
    return (block_end < end ? block_end : end) - pos;
  }

  // Bytes one position costs across this stage's layers.
  uint64_t bytes_per_token() const {
    return uint64_t{n_layers_} * (widths_.key + widths_.value) * sizeof(uint16_t);
  }
  KvWidths widths() const { return widths_; }
  uint64_t bytes_per_block() const { return bytes_per_token() * kKvBlockTokens; }
  // Blocks this cache refers to, and their bytes (shared ones included).
  size_t n_blocks() const { return blocks_.size(); }
  uint64_t allocated_bytes() const { return blocks_.size() * bytes_per_block(); }
  // Identity of block `b` (for counting shared blocks) and whether another
  // cache refers to it too.
  const void* block_id(size_t b) const { return blocks_[b].get(); }
  bool block_shared(size_t b) const { return blocks_[b].use_count() > 1; }

 private:
  struct Block;
  uint16_t* Row(uint32_t layer, uint32_t pos, int kv) const;
  std::shared_ptr<Block> NewBlock() const;
  // A new block holding the first `rows` positions of `from`.
  std::shared_ptr<Block> CopyOfRows(const Block& from, uint32_t rows) const;

  uint32_t n_layers_;
  uint32_t first_layer_;
  KvWidths widths_;
  uint32_t max_positions_;
  std::shared_ptr<KvBlockLedger> ledger_;
  std::vector<std::shared_ptr<Block>> blocks_;  // [pos / kKvBlockTokens]
  std::vector<int32_t> tokens_;                 // [pos]
  bool rounded_inputs_ = false;
  uint64_t writer_ = 0;
};

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_KV_CACHE_H_
