// BuilderState: the node table under construction and the nodes shared by
// every JSON value in it (whitespace, free-form values). Internal.
#ifndef RINGLM_INFERENCE_GRAMMAR_INTERNAL_BUILDER_STATE_H_
#define RINGLM_INFERENCE_GRAMMAR_INTERNAL_BUILDER_STATE_H_

#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "inference/grammar/grammar.h"
#include "inference/grammar/internal/grammar_ir.h"

namespace ringlm::grammar::internal {

// Node 0 matches nothing and node 1 matches "": after the first error every
// Add* returns kNeverNode, so callers need not check each call.
constexpr NodeId kNeverNode = 0;
constexpr NodeId kEmptyNode = 1;

struct BuilderState {
  explicit BuilderState(const GrammarOptions& opts);

  // Appends `node` (its children must exist); records an error past the size
  // limit.
  NodeId Add(Node node);
  NodeId Literal(std::string_view bytes);
  NodeId Sequence(std::vector<NodeId> parts);
  NodeId Choice(std::vector<NodeId> alternatives);
  // A string leaf of [min, max] code points; `excluded` = a trie of key names
  // it must not equal (kNoTrie for none).
  NodeId String(uint32_t min, uint32_t max, uint32_t excluded = kNoTrie);
  NodeId Number(bool integer_only);
  // Adds a trie, counting its nodes against the size limit; returns its index.
  uint32_t AddTrie(ByteTrie trie);
  // The whitespace leaf allowed between JSON tokens (one per grammar).
  NodeId Whitespace();
  // Free-form values allowing `depth` nested containers.
  NodeId AnyValue(uint32_t depth);
  NodeId AnyObject(uint32_t depth);
  NodeId AnyArray(uint32_t depth);
  // The array and object shapes shared with the schema compiler:
  //   "[" ws (item ws ("," ws item ws){min-1,max-1})? "]"
  //   "{" ws members "}"  with members in declared order (see kMembers).
  NodeId Array(NodeId item, uint32_t min, uint32_t max);
  NodeId Member(NodeId key, NodeId value);  // key ws ":" ws value ws
  NodeId WithSeparator(NodeId member);      // "," ws member
  NodeId Object(NodeId members);

  void SetError(absl::Status status);

  GrammarOptions options;
  GrammarData data;
  absl::Status error;
  size_t size = 0;  // nodes + trie nodes.
  bool built = false;

 private:
  NodeId whitespace_ = kNoNode;
  std::vector<NodeId> any_value_;  // by depth, kNoNode = not built yet.
  std::vector<NodeId> any_object_;
  std::vector<NodeId> any_array_;
  NodeId number_[2] = {kNoNode, kNoNode};
};

// Computes data->productive and checks the depth bound; InvalidArgument if the
// root matches nothing or nests too deep.
absl::Status FinishGrammar(const GrammarOptions& options, GrammarData* data);

}  // namespace ringlm::grammar::internal

#endif  // RINGLM_INFERENCE_GRAMMAR_INTERNAL_BUILDER_STATE_H_
