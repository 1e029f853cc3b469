#include "inference/tokenizer/spm_tokenizer.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "inference/tokenizer/symbol_merge.h"

namespace ringlm::tokenizer_internal {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 "▁"

// Value of a hex digit already validated by VocabIndex::Build.
int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// llama_escape_whitespace: every ' ' becomes U+2581.
std::string EscapeWhitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 2);
  for (char c : text) {
    if (c == ' ') {
      out.append(kSpaceMarker);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

SpmTokenizer::SpmTokenizer(std::unique_ptr<const VocabIndex> index) : Tokenizer(std::move(index)) {}

std::vector<int32_t> SpmTokenizer::EncodeFragments(std::string_view text,
                                                   std::span<const Fragment> fragments,
                                                   RunPosition position) const {
  const Vocabulary& vocab = index().vocab();
  std::vector<int32_t> out;
  out.reserve(text.size() / 2 + 2);

  // Like SentencePiece, the first raw fragment and each one after a special
  // token get a leading space; a run that continues earlier text has no
  // first fragment of its own.
  bool previous_is_special = !position.continues;
  if (position.add_bos && vocab.add_bos) out.push_back(vocab.bos_id);  // Create checked bos_id

  for (const Fragment& fragment : fragments) {
    if (fragment.token >= 0) {
      out.push_back(fragment.token);
      previous_is_special = true;
      continue;
    }
    std::string raw;
    if (vocab.add_space_prefix && previous_is_special) raw.push_back(' ');
    raw.append(fragment.text);
    EncodeFragment(EscapeWhitespace(raw), out);
    previous_is_special = false;
  }

  if (position.add_eos && vocab.add_eos) out.push_back(vocab.eos_id);  // Create checked eos_id
  return out;
}

// Merges the best-scoring adjacent pieces first (llm_tokenizer_spm).
void SpmTokenizer::EncodeFragment(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  const VocabIndex& vocab = index();
  // Highest score first: the smallest key is the negated score.
  const std::vector<std::string_view> pieces = MergeSymbols(
      text, [&](std::string_view left, std::string_view right) -> std::optional<double> {
        const int32_t id = vocab.Find(std::string_view(left.data(), left.size() + right.size()));
        if (id < 0) return std::nullopt;
        return -static_cast<double>(vocab.score(id));
      });

  // Emit the surviving symbols. A merged symbol is always a piece, so only an
  // unmerged character can be missing from the vocabulary; llama.cpp's
  // "resegment via recorded merges" step therefore never applies and is
  // omitted. Missing characters fall back to one byte token per byte.
  for (const std::string_view piece : pieces) {
    if (const int32_t id = vocab.Find(piece); id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char byte : piece) out.push_back(vocab.ByteToken(static_cast<uint8_t>(byte)));
  }
}

std::string SpmTokenizer::TokenToPiece(int32_t id) const {
  const VocabIndex& vocab = index();
  if (!vocab.IsValid(id)) return {};
  const std::string& text = vocab.text(id);
  switch (vocab.type(id)) {
    case TokenType::kNormal: {
      std::string out;
      out.reserve(text.size());
      for (size_t i = 0; i < text.size();) {
        if (text.compare(i, kSpaceMarker.size(), kSpaceMarker) == 0) {
          out.push_back(' ');
          i += kSpaceMarker.size();
        } else {
          out.push_back(text[i++]);
        }
      }
      return out;
    }
    case TokenType::kUserDefined:
      return text;  // verbatim, U+2581 included (as llama.cpp)
    case TokenType::kByte: {
      // Create checked the "<0xNN>" shape.
      return std::string(1, static_cast<char>(HexValue(text[3]) * 16 + HexValue(text[4])));
    }
    case TokenType::kControl:
    case TokenType::kUnknown:
    case TokenType::kUnused:
    case TokenType::kUndefined:
      return {};
  }
  return {};
}

}  // namespace ringlm::tokenizer_internal
