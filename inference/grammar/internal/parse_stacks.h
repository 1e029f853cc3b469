// ParseStacks: the set of live parse stacks of a grammar, advanced one byte at
// a time. Internal to inference/grammar (GrammarMatcher drives it).
#ifndef RINGLM_INFERENCE_GRAMMAR_INTERNAL_PARSE_STACKS_H_
#define RINGLM_INFERENCE_GRAMMAR_INTERNAL_PARSE_STACKS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "inference/grammar/internal/grammar_ir.h"
#include "inference/grammar/internal/leaf_machines.h"

namespace ringlm::grammar::internal {

// One stack entry: a node, its local state, and the entry below it.
struct Frame {
  NodeId node;
  uint32_t parent;  // kNoFrame = bottom of the stack.
  uint64_t state;
};
constexpr uint32_t kNoFrame = UINT32_MAX;

// Stacks are linked lists of immutable frames in one arena, so stacks that
// share a tail share its frames (a tree of stacks, GLR-like without merging).
// A "head" is the index of a stack's top frame; every head is a leaf that can
// consume at least one more byte. Closure (pushing children until a leaf is
// on top) happens eagerly, so "the grammar may end here" is a flag, not a head.
//
// Frames are only appended; the caller truncates the arena to a saved size to
// undo (the mask's trie walk) and calls Compact() to drop dead frames.
// Cost: Advance is O(heads x stack depth touched); no allocation once the
// arena and head buffers have grown. Not thread-safe; copyable.
class ParseStacks {
 public:
  explicit ParseStacks(const GrammarData* grammar) : g_(grammar) {}

  // Appends the heads of the initial stacks to *heads; returns whether the
  // grammar matches the empty string.
  bool Start(std::vector<uint32_t>* heads);

  // Feeds `byte` to heads[begin, end) and appends the surviving heads to
  // *heads (deduplicated, at most max_parse_heads). Returns whether some stack
  // completed the whole grammar with this byte.
  bool Advance(std::vector<uint32_t>* heads, size_t begin, size_t end, uint8_t byte);

  // Rewrites the arena to hold only the frames reachable from *heads (which
  // are renumbered in place).
  void Compact(std::vector<uint32_t>* heads);

  // Whether `head` is a JSON string leaf that accepts any `extra` more plain
  // bytes (printable ASCII but '"' and '\\'): the mask's shortcut for a
  // subtree of plain tokens. False whenever unsure.
  bool AcceptsPlainRun(uint32_t head, uint32_t extra) const;

  size_t arena_size() const { return frames_.size(); }
  void TruncateArena(size_t size) { frames_.resize(size); }

 private:
  void Enter(NodeId node, uint32_t parent);
  void Expand(NodeId node, uint32_t parent, uint64_t state);
  void ExpandRepeat(NodeId id, const Node& n, uint32_t parent, uint64_t state);
  void ExpandMembers(NodeId id, const Node& n, uint32_t parent, uint64_t state);
  void Resume(uint32_t frame);
  void AddLeaf(NodeId node, uint32_t parent, const LeafResult& r);
  uint32_t NewFrame(NodeId node, uint32_t parent, uint64_t state);

  const GrammarData* g_;
  std::vector<Frame> frames_;
  // Per Advance/Start call.
  std::vector<uint32_t>* out_ = nullptr;
  size_t out_begin_ = 0;
  bool can_end_ = false;
  std::vector<uint32_t> resumed_;  // frames already resumed in this call.
};

}  // namespace ringlm::grammar::internal

#endif  // RINGLM_INFERENCE_GRAMMAR_INTERNAL_PARSE_STACKS_H_
