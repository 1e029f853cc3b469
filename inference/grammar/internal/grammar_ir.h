// The compiled grammar: a DAG of nodes that the parse-stack engine walks one
// byte at a time. Internal to inference/grammar; callers see grammar.h.
#ifndef RINGLM_INFERENCE_GRAMMAR_INTERNAL_GRAMMAR_IR_H_
#define RINGLM_INFERENCE_GRAMMAR_INTERNAL_GRAMMAR_IR_H_

#include <cstdint>
#include <string>
#include <vector>

namespace ringlm::grammar::internal {

using NodeId = uint32_t;
constexpr NodeId kNoNode = UINT32_MAX;
constexpr uint32_t kNoTrie = UINT32_MAX;

enum class NodeKind : uint8_t {
  // Composite nodes: they push children and never consume a byte themselves.
  kEmpty,     // matches "".
  kSequence,  // children in order.
  kChoice,    // any one child; no children = matches nothing.
  kRepeat,    // children[0] (children[1] children[0]){min-1, max-1}; see Node.
  kMembers,   // JSON object members in declared order; see Node.
  // Leaves: byte-level state machines (internal/leaf_machines.h).
  kLiteral,     // the bytes of `literal`.
  kLiteralSet,  // any string of trie `trie` (enum/const values).
  kString,      // a JSON string "..." of [min, max] code points.
  kNumber,      // a JSON number; integer_only forbids fraction and exponent.
  kIntRange,    // a JSON integer in [int_min, int_max] (at most 18 digits).
  kWhitespace,  // "" | " " | "\n" [ \t]{0, max_indent}.
};

// One grammar node. Children always have smaller ids than their parent, so the
// node table is a DAG in topological order (checked by the builder).
struct Node {
  NodeKind kind = NodeKind::kEmpty;
  std::string literal;           // kLiteral: the bytes (non-empty).
  std::vector<NodeId> children;  // kSequence/kChoice/kRepeat: see NodeKind.
  // kMembers: children[j] = member j ("key": value ws), with_sep[j] = ", " +
  // member j, required[j]; extra/extra_with_sep = an additional member (or
  // kNoNode), at most `max` of them after all declared ones.
  std::vector<NodeId> with_sep;
  std::vector<bool> required;
  NodeId extra = kNoNode;
  NodeId extra_with_sep = kNoNode;
  // kRepeat: item count bounds; kString: code point bounds; kMembers: max extra.
  uint32_t min = 0;
  uint32_t max = 0;
  // kLiteralSet: the value trie; kString: trie of excluded key names (or kNoTrie).
  uint32_t trie = kNoTrie;
  bool integer_only = false;  // kNumber.
  int64_t int_min = 0;        // kIntRange bounds, inclusive.
  int64_t int_max = 0;
};

inline Node MakeNode(NodeKind kind) {
  Node node;
  node.kind = kind;
  return node;
}

// A byte trie (enum values, excluded object keys). Node 0 is the root.
struct ByteTrie {
  struct TrieNode {
    std::vector<std::pair<uint8_t, uint32_t>> edges;  // sorted by byte.
    bool terminal = false;
  };
  std::vector<TrieNode> nodes{TrieNode{}};

  void Insert(const std::string& bytes);
  // Returns the child of `node` on `byte`, or UINT32_MAX.
  uint32_t Step(uint32_t node, uint8_t byte) const;
};

// Limits the leaf machines read at match time (copied from GrammarOptions).
struct LeafLimits {
  uint32_t max_integer_digits = 16;
  uint32_t max_fraction_digits = 16;
  uint32_t max_exponent_digits = 2;
  uint32_t max_whitespace_indent = 20;
};

// An immutable compiled grammar, shared by every matcher that uses it.
struct GrammarData {
  std::vector<Node> nodes;
  std::vector<ByteTrie> tries;
  std::vector<bool> productive;  // node can match some finite string.
  NodeId root = kNoNode;
  LeafLimits limits;
  uint32_t max_parse_heads = 1024;
};

}  // namespace ringlm::grammar::internal

#endif  // RINGLM_INFERENCE_GRAMMAR_INTERNAL_GRAMMAR_IR_H_
