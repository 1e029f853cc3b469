#include "inference/grammar/grammar_matcher.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ringlm::grammar {

GrammarMatcher::GrammarMatcher(Grammar grammar, std::shared_ptr<const TokenVocabulary> vocabulary)
    : grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)), stacks_(&grammar_.data()) {
  can_end_ = stacks_.Start(&heads_);
}

void GrammarMatcher::FillMask(std::vector<uint8_t>* allowed) {
  allowed->assign(vocabulary_->size(), 0);
  if (heads_.empty()) return;
  const std::vector<TokenVocabulary::TrieNode>& trie = vocabulary_->trie();
  const std::vector<int32_t>& tokens = vocabulary_->trie_tokens();
  const size_t base_arena = stacks_.arena_size();
  scratch_heads_ = heads_;
  levels_.clear();
  levels_.push_back({0, heads_.size(), base_arena});
  // Hot loop: one Advance per trie node reached; a rejected prefix skips its
  // whole subtree. levels_[d] holds the heads after the first d bytes.
  size_t i = 0;
  while (i < trie.size()) {
    const TokenVocabulary::TrieNode& node = trie[i];
    const Level parent = levels_[node.depth - 1];
    levels_.resize(node.depth);
    scratch_heads_.resize(parent.heads_end);
    stacks_.TruncateArena(parent.arena_size);
    const bool can_end =
        stacks_.Advance(&scratch_heads_, parent.heads_begin, parent.heads_end, node.byte);
    const bool alive = scratch_heads_.size() > parent.heads_end;
    if (!alive && !can_end) {
      i = node.subtree_end;
      continue;
    }
    for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) (*allowed)[tokens[t]] = 1;
    if (!alive) {
      i = node.subtree_end;
      continue;
    }
    // Shortcut (the common case inside a string): if some head is a string
    // with room for every plain byte run below, the whole subtree is allowed.
    if (node.plain_height > 0 && node.plain_height != TokenVocabulary::kNotPlain &&
        AnyHeadAcceptsPlainRun(parent.heads_end, node.plain_height)) {
      const uint32_t end = vocabulary_->SubtreeTokensEnd(static_cast<uint32_t>(i));
      for (uint32_t t = node.tokens_end; t < end; ++t) (*allowed)[tokens[t]] = 1;
      i = node.subtree_end;
      continue;
    }
    levels_.push_back({parent.heads_end, scratch_heads_.size(), stacks_.arena_size()});
    ++i;
  }
  stacks_.TruncateArena(base_arena);
}

bool GrammarMatcher::AnyHeadAcceptsPlainRun(size_t begin, uint32_t extra) const {
  for (size_t h = begin; h < scratch_heads_.size(); ++h) {
    if (stacks_.AcceptsPlainRun(scratch_heads_[h], extra)) return true;
  }
  return false;
}

bool GrammarMatcher::IsAllowed(int32_t token) {
  if (token < 0 || static_cast<size_t>(token) >= vocabulary_->size()) return false;
  const std::string& bytes = vocabulary_->token_bytes(token);
  if (bytes.empty() || bytes.size() > UINT16_MAX) return false;
  const size_t mark = stacks_.arena_size();
  scratch_heads_ = heads_;
  bool can_end = can_end_;
  const bool ok = Run(bytes, &scratch_heads_, &can_end);
  stacks_.TruncateArena(mark);
  return ok;
}

bool GrammarMatcher::Run(std::string_view bytes, std::vector<uint32_t>* heads, bool* can_end) {
  for (char c : bytes) {
    if (heads->empty()) return false;
    const size_t n = heads->size();
    *can_end = stacks_.Advance(heads, 0, n, static_cast<uint8_t>(c));
    heads->erase(heads->begin(), heads->begin() + n);
    if (heads->empty() && !*can_end) return false;
  }
  return true;
}

absl::Status GrammarMatcher::AcceptBytes(std::string_view bytes) {
  if (bytes.empty()) return absl::InvalidArgumentError("grammar: empty bytes are never allowed");
  const size_t mark = stacks_.arena_size();
  std::vector<uint32_t> heads = heads_;
  bool can_end = can_end_;
  if (!Run(bytes, &heads, &can_end)) {
    stacks_.TruncateArena(mark);
    return absl::InvalidArgumentError("grammar: these bytes are not allowed here");
  }
  heads_ = std::move(heads);
  can_end_ = can_end;
  stacks_.Compact(&heads_);
  return absl::OkStatus();
}

absl::Status GrammarMatcher::Accept(int32_t token) {
  if (token < 0 || static_cast<size_t>(token) >= vocabulary_->size()) {
    return absl::InvalidArgumentError(absl::StrCat("grammar: token ", token, " out of range"));
  }
  const std::string& bytes = vocabulary_->token_bytes(token);
  if (bytes.empty() || bytes.size() > UINT16_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("grammar: token ", token, " has no bytes and is never allowed"));
  }
  absl::Status status = AcceptBytes(bytes);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("grammar: token ", token, " is not allowed"));
  }
  return status;
}

}  // namespace ringlm::grammar
