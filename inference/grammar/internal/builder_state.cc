#include "inference/grammar/internal/builder_state.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ringlm::grammar::internal {

void ByteTrie::Insert(const std::string& bytes) {
  uint32_t node = 0;
  for (char c : bytes) {
    const uint8_t b = static_cast<uint8_t>(c);
    uint32_t next = Step(node, b);
    if (next == UINT32_MAX) {
      next = static_cast<uint32_t>(nodes.size());
      auto& edges = nodes[node].edges;
      edges.insert(std::lower_bound(edges.begin(), edges.end(), std::make_pair(b, 0u)), {b, next});
      nodes.emplace_back();
    }
    node = next;
  }
  nodes[node].terminal = true;
}

uint32_t ByteTrie::Step(uint32_t node, uint8_t byte) const {
  for (const auto& [b, child] : nodes[node].edges) {
    if (b == byte) return child;
    if (b > byte) break;
  }
  return UINT32_MAX;
}

BuilderState::BuilderState(const GrammarOptions& opts) : options(opts) {
  error = options.Validate();
  data.limits = {options.max_integer_digits, options.max_fraction_digits,
                 options.max_exponent_digits, options.max_whitespace_indent};
  data.max_parse_heads = options.max_parse_heads;
  data.nodes.push_back(MakeNode(NodeKind::kChoice));  // kNeverNode
  data.nodes.push_back(MakeNode(NodeKind::kEmpty));   // kEmptyNode
  size = 2;
  any_value_.assign(options.max_any_depth + 1, kNoNode);
  any_object_ = any_array_ = any_value_;
}

void BuilderState::SetError(absl::Status status) {
  if (error.ok()) error = std::move(status);
}

NodeId BuilderState::Add(Node node) {
  if (!error.ok()) return kNeverNode;
  if (built) {
    SetError(absl::FailedPreconditionError("GrammarBuilder used after Build()"));
    return kNeverNode;
  }
  if (++size > options.max_grammar_size) {
    SetError(absl::InvalidArgumentError(absl::StrCat("grammar exceeds max_grammar_size (",
                                                     options.max_grammar_size,
                                                     " nodes); simplify the schema")));
    return kNeverNode;
  }
  const auto valid = [&](NodeId id) { return id == kNoNode || id < data.nodes.size(); };
  bool ok = std::all_of(node.children.begin(), node.children.end(), valid) &&
            std::all_of(node.with_sep.begin(), node.with_sep.end(), valid) && valid(node.extra) &&
            valid(node.extra_with_sep);
  if (!ok) {
    SetError(absl::InvalidArgumentError("grammar node from another builder"));
    return kNeverNode;
  }
  data.nodes.push_back(std::move(node));
  return static_cast<NodeId>(data.nodes.size() - 1);
}

NodeId BuilderState::Literal(std::string_view bytes) {
  if (bytes.empty()) return kEmptyNode;
  Node node = MakeNode(NodeKind::kLiteral);
  node.literal = std::string(bytes);
  return Add(std::move(node));
}

NodeId BuilderState::Sequence(std::vector<NodeId> parts) {
  std::erase(parts, kEmptyNode);
  if (parts.empty()) return kEmptyNode;
  if (parts.size() == 1) return parts[0];
  Node node = MakeNode(NodeKind::kSequence);
  node.children = std::move(parts);
  return Add(std::move(node));
}

NodeId BuilderState::Choice(std::vector<NodeId> alternatives) {
  std::erase(alternatives, kNeverNode);
  if (alternatives.empty()) return kNeverNode;
  if (alternatives.size() == 1) return alternatives[0];
  Node node = MakeNode(NodeKind::kChoice);
  node.children = std::move(alternatives);
  return Add(std::move(node));
}

NodeId BuilderState::String(uint32_t min, uint32_t max, uint32_t excluded) {
  Node node = MakeNode(NodeKind::kString);
  node.min = min;
  node.max = max;
  node.trie = excluded;
  return Add(std::move(node));
}

NodeId BuilderState::Number(bool integer_only) {
  NodeId& cached = number_[integer_only ? 1 : 0];
  if (cached == kNoNode || !error.ok()) {
    Node node = MakeNode(NodeKind::kNumber);
    node.integer_only = integer_only;
    cached = Add(std::move(node));
  }
  return cached;
}

uint32_t BuilderState::AddTrie(ByteTrie trie) {
  size += trie.nodes.size();
  if (size > options.max_grammar_size) {
    SetError(absl::InvalidArgumentError(absl::StrCat(
        "grammar exceeds max_grammar_size (", options.max_grammar_size, "): enum too large")));
  }
  data.tries.push_back(std::move(trie));
  return static_cast<uint32_t>(data.tries.size() - 1);
}

NodeId BuilderState::Whitespace() {
  if (whitespace_ == kNoNode || !error.ok()) {
    whitespace_ = Add(MakeNode(NodeKind::kWhitespace));
  }
  return whitespace_;
}

NodeId BuilderState::Array(NodeId item, uint32_t min, uint32_t max) {
  const NodeId ws = Whitespace();
  const NodeId sep = Sequence({Literal(","), ws});
  Node repeat = MakeNode(NodeKind::kRepeat);
  repeat.children = {Sequence({item, ws}), sep};
  repeat.min = min;
  repeat.max = max;
  const NodeId body = Add(std::move(repeat));
  return Sequence({Literal("["), ws, body, Literal("]")});
}

NodeId BuilderState::Member(NodeId key, NodeId value) {
  const NodeId ws = Whitespace();
  return Sequence({key, ws, Literal(":"), ws, value, ws});
}

NodeId BuilderState::WithSeparator(NodeId member) {
  return Sequence({Literal(","), Whitespace(), member});
}

NodeId BuilderState::Object(NodeId members) {
  return Sequence({Literal("{"), Whitespace(), members, Literal("}")});
}

NodeId BuilderState::AnyValue(uint32_t depth) {
  depth = std::min(depth, options.max_any_depth);
  if (any_value_[depth] != kNoNode && error.ok()) return any_value_[depth];
  std::vector<NodeId> alternatives = {String(0, options.max_string_length), Number(false),
                                      Literal("true"), Literal("false"), Literal("null")};
  if (depth > 0) {
    alternatives.push_back(AnyObject(depth));
    alternatives.push_back(AnyArray(depth));
  }
  return any_value_[depth] = Choice(std::move(alternatives));
}

NodeId BuilderState::AnyObject(uint32_t depth) {
  depth = std::clamp(depth, 1u, options.max_any_depth);
  if (any_object_[depth] != kNoNode && error.ok()) return any_object_[depth];
  const NodeId extra = Member(String(0, options.max_key_length), AnyValue(depth - 1));
  Node node = MakeNode(NodeKind::kMembers);
  node.extra = extra;
  node.extra_with_sep = WithSeparator(extra);
  node.max = options.max_additional_properties;
  const NodeId members = Add(std::move(node));
  return any_object_[depth] = Object(members);
}

NodeId BuilderState::AnyArray(uint32_t depth) {
  depth = std::clamp(depth, 1u, options.max_any_depth);
  if (any_array_[depth] != kNoNode && error.ok()) return any_array_[depth];
  return any_array_[depth] = Array(AnyValue(depth - 1), 0, options.max_array_items);
}

absl::Status FinishGrammar(const GrammarOptions& options, GrammarData* data) {
  const size_t n = data->nodes.size();
  data->productive.assign(n, false);
  std::vector<uint32_t> depth(n, 1);
  const auto& prod = data->productive;
  // Children precede parents, so one forward pass settles both properties.
  for (size_t id = 0; id < n; ++id) {
    const Node& node = data->nodes[id];
    bool p = true;
    switch (node.kind) {
      case NodeKind::kSequence:
        p = std::all_of(node.children.begin(), node.children.end(),
                        [&](NodeId c) { return prod[c]; });
        break;
      case NodeKind::kChoice:
        p = std::any_of(node.children.begin(), node.children.end(),
                        [&](NodeId c) { return prod[c]; });
        break;
      case NodeKind::kRepeat:
        p = node.min == 0 || (prod[node.children[0]] && (node.min < 2 || prod[node.children[1]]));
        break;
      case NodeKind::kMembers:
        for (size_t j = 0; j < node.children.size(); ++j) {
          if (node.required[j] && !prod[node.children[j]]) p = false;
        }
        break;
      case NodeKind::kString:
        p = node.min <= node.max;
        break;
      default:
        break;
    }
    data->productive[id] = p;
    uint32_t d = 0;
    const auto visit = [&](NodeId c) {
      if (c != kNoNode) d = std::max(d, depth[c]);
    };
    std::for_each(node.children.begin(), node.children.end(), visit);
    std::for_each(node.with_sep.begin(), node.with_sep.end(), visit);
    visit(node.extra);
    visit(node.extra_with_sep);
    depth[id] = d + 1;
  }
  if (data->root >= n) return absl::InvalidArgumentError("grammar root is not a node");
  if (!prod[data->root]) {
    return absl::InvalidArgumentError(
        "the grammar matches no finite output (a `false` schema, an empty enum, or a required "
        "recursive $ref deeper than max_ref_depth)");
  }
  if (depth[data->root] > options.max_grammar_depth) {
    return absl::InvalidArgumentError(absl::StrCat("grammar nests ", depth[data->root],
                                                   " levels deep; the limit is ",
                                                   options.max_grammar_depth));
  }
  return absl::OkStatus();
}

}  // namespace ringlm::grammar::internal
