// Byte-level state machines for the grammar's leaves (literal, literal set,
// JSON string, JSON number, bounded whitespace). Inline: they run once per
// trie node in the mask's hot loop.
#ifndef RINGLM_INFERENCE_GRAMMAR_INTERNAL_LEAF_MACHINES_H_
#define RINGLM_INFERENCE_GRAMMAR_INTERNAL_LEAF_MACHINES_H_

#include <algorithm>
#include <cstdint>

#include "inference/grammar/internal/grammar_ir.h"

namespace ringlm::grammar::internal {

// What a leaf can do from a state: `ok` = the byte was accepted (always true
// for LeafInit); may_continue = some byte can follow; may_end = the leaf is
// complete here. Every reachable state has may_continue || may_end.
struct LeafResult {
  bool ok = false;
  bool may_continue = false;
  bool may_end = false;
  uint64_t state = 0;
};

// JSON string state, packed in 64 bits.
namespace string_state {
constexpr uint64_t kCountMask = (1u << 24) - 1;  // code points so far.
constexpr int kEscShift = 24;                    // 0 none, 1 after '\', 2..5 = \u + k-2 hex digits,
constexpr uint64_t kEscMask = 7;  // 6 = \u then 'D' (next must be 0-7: no surrogates).
constexpr int kRemShift = 27;     // UTF-8 continuation bytes still owed.
constexpr int kLowShift = 29;     // range of the next continuation byte (kRange*).
constexpr uint64_t kOpened = 1ull << 32;
constexpr int kTrieShift = 33;  // excluded-name trie node + 1; 0 = cannot match.
}  // namespace string_state

inline bool IsHexDigit(uint8_t b) {
  return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F');
}

inline LeafResult Continue(uint64_t state) { return {true, true, false, state}; }
inline LeafResult Reject() { return {}; }

inline LeafResult StringStep(const GrammarData& g, const Node& n, uint64_t s, uint8_t b) {
  using namespace string_state;
  if (!(s & kOpened)) return b == '"' ? Continue(s | kOpened) : Reject();
  uint64_t count = s & kCountMask;
  const uint64_t esc = (s >> kEscShift) & kEscMask;
  const uint64_t rem = (s >> kRemShift) & 3;
  uint64_t trie = s >> kTrieShift;
  auto with_trie = [&](uint64_t base) {
    if (trie != 0) {
      const uint32_t next = g.tries[n.trie].Step(static_cast<uint32_t>(trie - 1), b);
      trie = next == UINT32_MAX ? 0 : next + 1;
    }
    return (base & ((1ull << kTrieShift) - 1)) | (trie << kTrieShift);
  };
  if (rem > 0) {
    // Continuation byte; the first one after E0/ED/F0/F4 has a narrower range.
    static constexpr uint8_t kLo[5] = {0x80, 0xA0, 0x80, 0x90, 0x80};
    static constexpr uint8_t kHi[5] = {0xBF, 0xBF, 0x9F, 0xBF, 0x8F};
    const uint64_t range = (s >> kLowShift) & 7;
    if (b < kLo[range] || b > kHi[range]) return Reject();
    uint64_t next = s & ~((3ull << kRemShift) | (7ull << kLowShift));
    next |= (rem - 1) << kRemShift;
    return Continue(with_trie(next));
  }
  const uint64_t no_esc = s & ~(kEscMask << kEscShift);
  switch (esc) {
    case 0:
      break;
    case 1:
      switch (b) {
        case '"':
        case '\\':
        case '/':
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't':
          return Continue(no_esc);
        case 'u':
          return Continue(no_esc | (2ull << kEscShift));
        default:
          return Reject();
      }
    case 2:
      if (b == 'd' || b == 'D') return Continue(no_esc | (6ull << kEscShift));
      return IsHexDigit(b) ? Continue(no_esc | (3ull << kEscShift)) : Reject();
    case 6:
      return (b >= '0' && b <= '7') ? Continue(no_esc | (4ull << kEscShift)) : Reject();
    case 3:
    case 4:
      return IsHexDigit(b) ? Continue(no_esc | ((esc + 1) << kEscShift)) : Reject();
    case 5:
      return IsHexDigit(b) ? Continue(no_esc) : Reject();
    default:
      return Reject();
  }
  if (b == '"') {
    if (count < n.min) return Reject();
    if (trie != 0 && g.tries[n.trie].nodes[trie - 1].terminal) return Reject();
    return {true, false, true, s};
  }
  if (count >= n.max || b < 0x20) return Reject();
  ++count;
  uint64_t base = (s & ~kCountMask) | count;
  if (b == '\\') {
    // Escapes would let an excluded key be spelled differently: refused there.
    if (n.trie != kNoTrie) return Reject();
    return Continue(base | (1ull << kEscShift));
  }
  if (b < 0x80) return Continue(with_trie(base));
  uint64_t need = 0;
  uint64_t range = 0;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    range = b == 0xE0 ? 1 : (b == 0xED ? 2 : 0);
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    range = b == 0xF0 ? 3 : (b == 0xF4 ? 4 : 0);
  } else {
    return Reject();
  }
  return Continue(with_trie(base | (need << kRemShift) | (range << kLowShift)));
}

// JSON number state: phase in the low byte, digit count above it.
namespace number_state {
enum Phase : uint64_t {
  kStart,
  kMinus,
  kIntDigits,
  kZero,
  kDot,
  kFracDigits,
  kExp,
  kExpSign,
  kExpDigits,
};
inline uint64_t Make(Phase p, uint64_t digits) { return p | (digits << 8); }
}  // namespace number_state

inline LeafResult NumberResult(const GrammarData& g, const Node& n, uint64_t s) {
  using namespace number_state;
  const uint64_t phase = s & 0xff;
  const uint64_t digits = s >> 8;
  const LeafLimits& lim = g.limits;
  const bool frac = !n.integer_only;
  switch (phase) {
    case kIntDigits:
      return {true, digits < lim.max_integer_digits || frac, true, s};
    case kZero:
      return {true, frac, true, s};
    case kFracDigits:
      return {true, true, true, s};
    case kExpDigits:
      return {true, digits < lim.max_exponent_digits, true, s};
    default:
      return {true, true, false, s};
  }
}

inline LeafResult NumberStep(const GrammarData& g, const Node& n, uint64_t s, uint8_t b) {
  using namespace number_state;
  const uint64_t phase = s & 0xff;
  const uint64_t digits = s >> 8;
  const LeafLimits& lim = g.limits;
  const bool digit = b >= '0' && b <= '9';
  const bool frac = !n.integer_only;
  uint64_t next;
  switch (phase) {
    case kStart:
    case kMinus:
      if (b == '-' && phase == kStart) {
        next = Make(kMinus, 0);
      } else if (b == '0') {
        next = Make(kZero, 0);
      } else if (digit) {
        next = Make(kIntDigits, 1);
      } else {
        return Reject();
      }
      break;
    case kIntDigits:
    case kZero:
      if (digit && phase == kIntDigits && digits < lim.max_integer_digits) {
        next = Make(kIntDigits, digits + 1);
      } else if (frac && b == '.') {
        next = Make(kDot, 0);
      } else if (frac && (b == 'e' || b == 'E')) {
        next = Make(kExp, 0);
      } else {
        return Reject();
      }
      break;
    case kDot:
      if (!digit) return Reject();
      next = Make(kFracDigits, 1);
      break;
    case kFracDigits:
      if (digit && digits < lim.max_fraction_digits) {
        next = Make(kFracDigits, digits + 1);
      } else if (b == 'e' || b == 'E') {
        next = Make(kExp, 0);
      } else {
        return Reject();
      }
      break;
    case kExp:
      if (b == '+' || b == '-') {
        next = Make(kExpSign, 0);
        break;
      }
      [[fallthrough]];
    case kExpSign:
      if (!digit) return Reject();
      next = Make(kExpDigits, 1);
      break;
    case kExpDigits:
      if (!digit || digits >= lim.max_exponent_digits) return Reject();
      next = Make(kExpDigits, digits + 1);
      break;
    default:
      return Reject();
  }
  return NumberResult(g, n, next);
}

// Integer range state: phase in the low 2 bits (0 start, 1 after '-', 2 digits
// of a positive value, 3 digits of a negative one), the magnitude above.
namespace int_range {
constexpr uint32_t kMaxDigits = 18;  // 10^18 < 2^62: no overflow below.

inline uint64_t Pow10(uint32_t k) {
  uint64_t p = 1;
  while (k-- > 0) p *= 10;
  return p;
}

inline uint32_t Digits(uint64_t v) {
  uint32_t d = 1;
  while (v >= 10) v /= 10, ++d;
  return d;
}

// Magnitudes allowed for a sign: positive -> [max(lo, 0), hi], negative ->
// [max(1, -hi), -lo] ("-0" is never produced). Empty when lo > hi.
struct Magnitudes {
  uint64_t lo = 1;
  uint64_t hi = 0;
};

inline Magnitudes ForSign(const Node& n, bool negative) {
  Magnitudes m;
  if (!negative && n.int_max >= 0) {
    m = {static_cast<uint64_t>(std::max<int64_t>(n.int_min, 0)), static_cast<uint64_t>(n.int_max)};
  } else if (negative && n.int_min < 0) {
    m = {static_cast<uint64_t>(std::max<int64_t>(1, -n.int_max)),
         static_cast<uint64_t>(-n.int_min)};
  }
  return m;
}

// Whether appending k >= k_min more digits to magnitude prefix p > 0 can land
// in m: the k-digit extensions of p cover [p 10^k, p 10^k + 10^k - 1].
inline bool Reachable(uint64_t p, const Magnitudes& m, uint32_t k_min) {
  const uint32_t d = Digits(p);
  for (uint32_t k = k_min; d + k <= kMaxDigits; ++k) {
    const uint64_t scale = Pow10(k);
    const uint64_t lo = p * scale;
    if (lo > m.hi) break;
    if (lo + scale - 1 >= m.lo) return true;
  }
  return false;
}
}  // namespace int_range

inline LeafResult IntRangeStep(const Node& n, uint64_t s, uint8_t b) {
  using namespace int_range;
  const uint64_t phase = s & 3;
  const uint64_t p = s >> 2;
  const bool digit = b >= '0' && b <= '9';
  if (phase == 0 && b == '-') {
    const Magnitudes m = ForSign(n, true);
    return m.lo <= m.hi && m.lo < Pow10(kMaxDigits) ? Continue(1) : Reject();
  }
  if (!digit || (phase >= 2 && p == 0)) return Reject();
  const bool negative = phase == 1 || phase == 3;
  const Magnitudes m = ForSign(n, negative);
  const uint64_t next = phase >= 2 ? p * 10 + (b - '0') : b - '0';
  if (next == 0) {  // a lone "0" ("-0" is refused by ForSign's lo >= 1).
    return m.lo == 0 ? LeafResult{true, false, true, 2} : Reject();
  }
  if (Digits(next) > kMaxDigits || !Reachable(next, m, 0)) return Reject();
  return {true, Reachable(next, m, 1), m.lo <= next && next <= m.hi,
          (next << 2) | (negative ? 3 : 2)};
}

// Whitespace state: 0 = nothing yet, 1 = one space, 2 + k = "\n" and k indents.
inline LeafResult WhitespaceStep(const GrammarData& g, uint64_t s, uint8_t b) {
  if (s == 0) {
    if (b == ' ') return {true, false, true, 1};
    if (b == '\n') return {true, g.limits.max_whitespace_indent > 0, true, 2};
    return Reject();
  }
  if (s >= 2 && (b == ' ' || b == '\t') && s - 2 < g.limits.max_whitespace_indent) {
    return {true, s - 1 < g.limits.max_whitespace_indent, true, s + 1};
  }
  return Reject();
}

inline LeafResult TrieResult(const ByteTrie& trie, uint32_t node) {
  const ByteTrie::TrieNode& t = trie.nodes[node];
  return {true, !t.edges.empty(), t.terminal, node};
}

// The state a leaf starts in.
inline LeafResult LeafInit(const GrammarData& g, const Node& n) {
  switch (n.kind) {
    case NodeKind::kLiteralSet:
      return TrieResult(g.tries[n.trie], 0);
    case NodeKind::kString:
      return Continue(n.trie == kNoTrie ? 0 : (1ull << string_state::kTrieShift));
    case NodeKind::kWhitespace:
      return {true, true, true, 0};
    default:  // literal (never empty), number, integer range.
      return Continue(0);
  }
}

// Feeds one byte to a leaf in state `s`.
inline LeafResult LeafStep(const GrammarData& g, const Node& n, uint64_t s, uint8_t b) {
  switch (n.kind) {
    case NodeKind::kLiteral:
      if (static_cast<uint8_t>(n.literal[s]) != b) return Reject();
      return {true, s + 1 < n.literal.size(), s + 1 == n.literal.size(), s + 1};
    case NodeKind::kLiteralSet: {
      const uint32_t next = g.tries[n.trie].Step(static_cast<uint32_t>(s), b);
      return next == UINT32_MAX ? Reject() : TrieResult(g.tries[n.trie], next);
    }
    case NodeKind::kString:
      return StringStep(g, n, s, b);
    case NodeKind::kNumber:
      return NumberStep(g, n, s, b);
    case NodeKind::kIntRange:
      return IntRangeStep(n, s, b);
    case NodeKind::kWhitespace:
      return WhitespaceStep(g, s, b);
    default:
      return Reject();
  }
}

}  // namespace ringlm::grammar::internal

#endif  // RINGLM_INFERENCE_GRAMMAR_INTERNAL_LEAF_MACHINES_H_
