#include "inference/grammar/internal/parse_stacks.h"

#include <algorithm>

namespace ringlm::grammar::internal {
namespace {

// kRepeat state: items done << 2 | phase.
enum RepeatPhase : uint64_t { kRepeatStart = 0, kAfterItem = 1, kAfterSep = 2 };
uint64_t RepeatState(uint64_t count, RepeatPhase phase) { return (count << 2) | phase; }

// kMembers state: next declared member | emitted-any bit | extra members done.
constexpr uint64_t kIndexMask = (1u << 24) - 1;
constexpr uint64_t kEmitted = 1u << 24;
constexpr int kExtraShift = 25;

}  // namespace

bool ParseStacks::Start(std::vector<uint32_t>* heads) {
  out_ = heads;
  out_begin_ = heads->size();
  can_end_ = false;
  resumed_.clear();
  Enter(g_->root, kNoFrame);
  return can_end_;
}

bool ParseStacks::Advance(std::vector<uint32_t>* heads, size_t begin, size_t end, uint8_t byte) {
  out_ = heads;
  out_begin_ = heads->size();
  can_end_ = false;
  resumed_.clear();
  for (size_t i = begin; i < end; ++i) {
    const Frame f = frames_[(*heads)[i]];  // copy: the arena may grow.
    const Node& n = g_->nodes[f.node];
    const LeafResult r = LeafStep(*g_, n, f.state, byte);
    if (r.ok) AddLeaf(f.node, f.parent, r);
  }
  return can_end_;
}

uint32_t ParseStacks::NewFrame(NodeId node, uint32_t parent, uint64_t state) {
  frames_.push_back(Frame{node, parent, state});
  return static_cast<uint32_t>(frames_.size() - 1);
}

void ParseStacks::AddLeaf(NodeId node, uint32_t parent, const LeafResult& r) {
  if (r.may_continue) {
    std::vector<uint32_t>& out = *out_;
    bool duplicate = false;
    for (size_t i = out_begin_; i < out.size(); ++i) {
      const Frame& h = frames_[out[i]];
      if (h.node == node && h.parent == parent && h.state == r.state) {
        duplicate = true;
        break;
      }
    }
    // Over the cap, further alternatives are dropped: every head can complete
    // on its own, so the language shrinks but outputs stay valid.
    if (!duplicate && out.size() - out_begin_ < g_->max_parse_heads) {
      out.push_back(NewFrame(node, parent, r.state));
    }
  }
  if (r.may_end) Resume(parent);
}

void ParseStacks::Resume(uint32_t frame) {
  if (frame == kNoFrame) {
    can_end_ = true;
    return;
  }
  if (std::find(resumed_.begin(), resumed_.end(), frame) != resumed_.end()) return;
  resumed_.push_back(frame);
  const Frame f = frames_[frame];
  Expand(f.node, f.parent, f.state);
}

void ParseStacks::Enter(NodeId id, uint32_t parent) {
  if (!g_->productive[id]) return;
  const Node& n = g_->nodes[id];
  switch (n.kind) {
    case NodeKind::kEmpty:
    case NodeKind::kSequence:
    case NodeKind::kRepeat:
    case NodeKind::kMembers:
      Expand(id, parent, 0);
      return;
    case NodeKind::kChoice:
      for (NodeId child : n.children) Enter(child, parent);
      return;
    default:
      AddLeaf(id, parent, LeafInit(*g_, n));
      return;
  }
}

void ParseStacks::Expand(NodeId id, uint32_t parent, uint64_t state) {
  const Node& n = g_->nodes[id];
  switch (n.kind) {
    case NodeKind::kSequence: {
      const size_t i = state;
      if (i == n.children.size()) {
        Resume(parent);
      } else if (i + 1 == n.children.size()) {
        Enter(n.children[i], parent);  // tail position: no frame left behind.
      } else {
        Enter(n.children[i], NewFrame(id, parent, i + 1));
      }
      return;
    }
    case NodeKind::kRepeat:
      ExpandRepeat(id, n, parent, state);
      return;
    case NodeKind::kMembers:
      ExpandMembers(id, n, parent, state);
      return;
    default:  // kEmpty.
      Resume(parent);
      return;
  }
}

void ParseStacks::ExpandRepeat(NodeId id, const Node& n, uint32_t parent, uint64_t state) {
  const uint64_t count = state >> 2;
  const NodeId item = n.children[0];
  const NodeId sep = n.children.size() > 1 ? n.children[1] : kNoNode;
  switch (state & 3) {
    case kRepeatStart:
      if (n.max > 0) Enter(item, NewFrame(id, parent, RepeatState(1, kAfterItem)));
      if (n.min == 0) Resume(parent);
      return;
    case kAfterItem:
      if (count < n.max) {
        if (sep == kNoNode) {
          Enter(item, NewFrame(id, parent, RepeatState(count + 1, kAfterItem)));
        } else {
          Enter(sep, NewFrame(id, parent, RepeatState(count, kAfterSep)));
        }
      }
      if (count >= n.min) Resume(parent);
      return;
    default:  // kAfterSep.
      Enter(item, NewFrame(id, parent, RepeatState(count + 1, kAfterItem)));
      return;
  }
}

void ParseStacks::ExpandMembers(NodeId id, const Node& n, uint32_t parent, uint64_t state) {
  const size_t next = state & kIndexMask;
  const bool emitted = state & kEmitted;
  const uint64_t extra_done = state >> kExtraShift;
  // Declared members in order: any optional ones may be skipped, but not a
  // required one.
  for (size_t j = next; j < n.children.size(); ++j) {
    const NodeId member = emitted ? n.with_sep[j] : n.children[j];
    if (g_->productive[member]) Enter(member, NewFrame(id, parent, (j + 1) | kEmitted));
    if (n.required[j]) return;
  }
  if (n.extra != kNoNode && extra_done < n.max) {
    const NodeId member = emitted ? n.extra_with_sep : n.extra;
    const uint64_t after = n.children.size() | kEmitted | ((extra_done + 1) << kExtraShift);
    Enter(member, NewFrame(id, parent, after));
  }
  Resume(parent);
}

bool ParseStacks::AcceptsPlainRun(uint32_t head, uint32_t extra) const {
  using namespace string_state;
  const Frame& f = frames_[head];
  const Node& n = g_->nodes[f.node];
  if (n.kind != NodeKind::kString) return false;
  // Opened, no escape or UTF-8 sequence pending, no excluded name to track.
  const uint64_t pending = (kEscMask << kEscShift) | (3ull << kRemShift) | (~0ull << kTrieShift);
  if (!(f.state & kOpened) || (f.state & pending) != 0) return false;
  return (f.state & kCountMask) + extra <= n.max;
}

void ParseStacks::Compact(std::vector<uint32_t>* heads) {
  std::vector<Frame> kept;
  std::vector<uint32_t> remap(frames_.size(), kNoFrame);
  std::vector<uint32_t> chain;
  for (uint32_t& head : *heads) {
    // Collect the frames not yet copied, top first, then copy bottom first.
    chain.clear();
    for (uint32_t f = head; f != kNoFrame && remap[f] == kNoFrame; f = frames_[f].parent) {
      chain.push_back(f);
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      Frame f = frames_[*it];
      if (f.parent != kNoFrame) f.parent = remap[f.parent];
      remap[*it] = static_cast<uint32_t>(kept.size());
      kept.push_back(f);
    }
    head = remap[head];
  }
  frames_ = std::move(kept);
}

}  // namespace ringlm::grammar::internal
