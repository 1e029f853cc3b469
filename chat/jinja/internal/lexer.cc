#include "chat/jinja/internal/lexer.h"

#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "chat/jinja/internal/str_cat.h"
#include "chat/jinja/internal/unicode.h"

namespace ringlm::jinja::internal {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

// Length of the Python-whitespace run (\s*) starting at pos.
size_t SpaceRun(std::string_view s, size_t pos) {
  size_t start = pos;
  while (pos < s.size()) {
    size_t len = 1;
    uint32_t cp = DecodeUtf8(s, pos, &len);
    if (!IsPySpace(cp)) break;
    pos += len;
  }
  return pos - start;
}

bool AllSpace(std::string_view s) { return SpaceRun(s, 0) == s.size(); }

std::string RStrip(std::string_view s) {
  size_t begin = 0;
  size_t end = 0;
  StripSpaceRange(s, false, true, &begin, &end);
  return std::string(s.substr(0, end));
}

int CountNewlines(std::string_view s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  absl::StatusOr<std::vector<Token>> Run();

 private:
  absl::Status Error(std::string_view message) const {
    return absl::InvalidArgumentError(Cat("template syntax error at line ", line_, ": ", message));
  }
  void Emit(TokenType type, std::string value = "") {
    Token token;
    token.type = type;
    token.value = std::move(value);
    token.line = line_;
    tokens_.push_back(std::move(token));
  }
  // Applies the "-" / lstrip rules to `text` that precedes a tag whose strip
  // sign is `sign`; `lstrip_ok` is false for "{{".
  void EmitData(std::string_view text, char sign, bool lstrip_ok);
  // Consumes `n` bytes, tracking lines and whether the match ended a line.
  void Advance(size_t n) {
    std::string_view consumed = std::string_view(src_).substr(pos_, n);
    line_ += CountNewlines(consumed);
    if (n > 0) line_starting_ = consumed.back() == '\n';
    pos_ += n;
  }
  // Matches a tag end ("%}" family for blocks, "}}" for variables) at pos_;
  // returns its length or 0.
  size_t MatchEnd(bool block) const;
  // Matches "{%(-|+|)\s*<word>\s*" with an end tag (for raw/endraw); returns
  // the total length or 0, setting *sign.
  size_t MatchRawTag(size_t at, std::string_view word, bool trim, char* sign) const;
  absl::Status LexTag(bool block);
  absl::Status LexComment();
  absl::Status LexRaw();
  absl::Status LexString();
  absl::Status LexNumber();

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

void Lexer::EmitData(std::string_view text, char sign, bool lstrip_ok) {
  std::string data(text);
  if (sign == '-') {
    data = RStrip(data);
  } else if (sign != '+' && lstrip_ok) {
    size_t nl = data.rfind('\n');
    size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if (l_pos > 0 || line_starting_) {
      std::string_view tail = std::string_view(data).substr(l_pos);
      if (!tail.empty() && AllSpace(tail)) data.resize(l_pos);
    }
  }
  if (!data.empty()) {
    int saved = line_;
    Emit(TokenType::kData, std::move(data));
    tokens_.back().line = saved;
  }
}

size_t Lexer::MatchEnd(bool block) const {
  std::string_view rest = std::string_view(src_).substr(pos_);
  if (block) {
    if (rest.starts_with("+%}")) return 3;
    if (rest.starts_with("-%}")) return 3 + SpaceRun(rest, 3);
    if (rest.starts_with("%}")) return rest.size() > 2 && rest[2] == '\n' ? 3 : 2;
    return 0;
  }
  if (rest.starts_with("-}}")) return 3 + SpaceRun(rest, 3);
  if (rest.starts_with("}}")) return 2;
  return 0;
}

size_t Lexer::MatchRawTag(size_t at, std::string_view word, bool trim, char* sign) const {
  std::string_view rest = std::string_view(src_).substr(at);
  if (!rest.starts_with("{%")) return 0;
  size_t p = 2;
  *sign = 0;
  if (p < rest.size() && (rest[p] == '-' || rest[p] == '+')) *sign = rest[p++];
  p += SpaceRun(rest, p);
  if (!rest.substr(p).starts_with(word)) return 0;
  p += word.size();
  p += SpaceRun(rest, p);
  std::string_view tail = rest.substr(p);
  if (trim && tail.starts_with("+%}")) return p + 3;
  if (tail.starts_with("-%}")) return p + 3 + SpaceRun(rest, p + 3);
  if (tail.starts_with("%}")) {
    return p + 2 + (trim && p + 2 < rest.size() && rest[p + 2] == '\n');
  }
  return 0;
}

absl::StatusOr<std::vector<Token>> Lexer::Run() {
  while (pos_ < src_.size()) {
    size_t tag = pos_;
    while (true) {
      tag = src_.find('{', tag);
      if (tag == std::string::npos || tag + 1 >= src_.size()) {
        tag = std::string::npos;
        break;
      }
      char c = src_[tag + 1];
      if (c == '{' || c == '%' || c == '#') break;
      ++tag;
    }
    if (tag == std::string::npos) {
      Emit(TokenType::kData, src_.substr(pos_));
      Advance(src_.size() - pos_);
      break;
    }
    std::string_view text = std::string_view(src_).substr(pos_, tag - pos_);
    char kind = src_[tag + 1];
    char raw_sign = 0;
    size_t raw_len = kind == '%' ? MatchRawTag(tag, "raw", false, &raw_sign) : 0;
    if (raw_len > 0) {
      EmitData(text, raw_sign, true);
      Advance(tag - pos_);
      Advance(raw_len);
      absl::Status status = LexRaw();
      if (!status.ok()) return status;
      continue;
    }
    char sign = tag + 2 < src_.size() ? src_[tag + 2] : 0;
    if (sign != '-' && sign != '+') sign = 0;
    EmitData(text, sign, kind != '{');
    Advance(tag - pos_);
    Advance(2 + (sign != 0));
    absl::Status status;
    if (kind == '#') {
      status = LexComment();
    } else {
      status = LexTag(kind == '%');
    }
    if (!status.ok()) return status;
  }
  Emit(TokenType::kEof);
  return std::move(tokens_);
}

absl::Status Lexer::LexComment() {
  for (size_t p = pos_; p + 1 < src_.size(); ++p) {
    std::string_view rest = std::string_view(src_).substr(p);
    size_t len = 0;
    if (rest.starts_with("+#}")) {
      len = 3;
    } else if (rest.starts_with("-#}")) {
      len = 3 + SpaceRun(rest, 3);
    } else if (rest.starts_with("#}")) {
      len = rest.size() > 2 && rest[2] == '\n' ? 3 : 2;
    }
    if (len > 0) {
      Advance(p - pos_);
      Advance(len);
      return absl::OkStatus();
    }
  }
  return Error("Missing end of comment tag");
}

absl::Status Lexer::LexRaw() {
  for (size_t p = pos_; p < src_.size(); ++p) {
    if (src_[p] != '{') continue;
    char sign = 0;
    size_t len = MatchRawTag(p, "endraw", true, &sign);
    if (len == 0) continue;
    EmitData(std::string_view(src_).substr(pos_, p - pos_), sign, true);
    Advance(p - pos_);
    Advance(len);
    return absl::OkStatus();
  }
  return Error("Missing end of raw directive");
}

absl::Status Lexer::LexTag(bool block) {
  Emit(block ? TokenType::kBlockBegin : TokenType::kVarBegin);
  std::vector<char> balance;
  while (true) {
    if (pos_ >= src_.size()) {
      return Error(block ? "unexpected end of template, expected '%}'"
                         : "unexpected end of template, expected '}}'");
    }
    if (balance.empty()) {
      size_t end = MatchEnd(block);
      if (end > 0) {
        Emit(block ? TokenType::kBlockEnd : TokenType::kVarEnd);
        Advance(end);
        return absl::OkStatus();
      }
    }
    size_t space = SpaceRun(src_, pos_);
    if (space > 0) {
      Advance(space);
      continue;
    }
    char c = src_[pos_];
    if (IsDigit(c)) {
      absl::Status status = LexNumber();
      if (!status.ok()) return status;
      continue;
    }
    if (IsNameStart(c)) {
      size_t end = pos_;
      while (end < src_.size() && IsNameChar(src_[end])) ++end;
      Emit(TokenType::kName, src_.substr(pos_, end - pos_));
      Advance(end - pos_);
      continue;
    }
    if (c == '\'' || c == '"') {
      absl::Status status = LexString();
      if (!status.ok()) return status;
      continue;
    }
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    std::string_view rest = std::string_view(src_).substr(pos_);
    std::string op;
    for (std::string_view two : kTwo) {
      if (rest.starts_with(two)) op = std::string(two);
    }
    if (op.empty()) {
      static constexpr std::string_view kOne = "+-/*%~[](){}=<>.:|,;";
      if (kOne.find(c) == std::string_view::npos) {
        return Error(Cat("unexpected char '", std::string(1, c), "'"));
      }
      op = std::string(1, c);
    }
    if (op == "(" || op == "[" || op == "{") {
      balance.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
    } else if (op == ")" || op == "]" || op == "}") {
      if (balance.empty()) return Error(Cat("unexpected '", op, "'"));
      if (balance.back() != op[0]) {
        return Error(Cat("unexpected '", op, "', expected '", std::string(1, balance.back()), "'"));
      }
      balance.pop_back();
    }
    Emit(TokenType::kOperator, op);
    Advance(op.size());
  }
}

absl::Status Lexer::LexString() {
  char quote = src_[pos_];
  size_t p = pos_ + 1;
  std::string out;
  while (p < src_.size() && src_[p] != quote) {
    char c = src_[p];
    if (c != '\\') {
      out.push_back(c);
      ++p;
      continue;
    }
    if (p + 1 >= src_.size()) break;
    char e = src_[p + 1];
    p += 2;
    auto hex = [&](int digits) -> bool {
      if (p + digits > src_.size()) return false;
      uint32_t cp = 0;
      for (int i = 0; i < digits; ++i) {
        char h = src_[p + i];
        int v = IsDigit(h)               ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                         : -1;
        if (v < 0) return false;
        cp = cp * 16 + v;
      }
      if (cp > 0x10FFFF) return false;
      AppendUtf8(cp, &out);
      p += digits;
      return true;
    };
    switch (e) {
      case '\n':
        break;
      case '\\':
        out.push_back('\\');
        break;
      case '\'':
        out.push_back('\'');
        break;
      case '"':
        out.push_back('"');
        break;
      case 'a':
        out.push_back('\a');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'n':
        out.push_back('\n');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'v':
        out.push_back('\v');
        break;
      case 'x':
        if (!hex(2)) return Error("invalid \\x escape in string literal");
        break;
      case 'u':
        if (!hex(4)) return Error("invalid \\u escape in string literal");
        break;
      case 'U':
        if (!hex(8)) return Error("invalid \\U escape in string literal");
        break;
      default:
        if (e >= '0' && e <= '7') {
          uint32_t cp = e - '0';
          for (int i = 0; i < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++i) {
            cp = cp * 8 + (src_[p++] - '0');
          }
          AppendUtf8(cp, &out);
        } else {
          out.push_back('\\');
          out.push_back(e);
        }
    }
  }
  if (p >= src_.size()) return Error("unterminated string literal");
  Emit(TokenType::kString, std::move(out));
  Advance(p + 1 - pos_);
  return absl::OkStatus();
}

absl::Status Lexer::LexNumber() {
  size_t p = pos_;
  auto digits = [&](size_t at) {
    size_t q = at;
    while (q < src_.size() && (IsDigit(src_[q]) || (src_[q] == '_' && q > at &&
                                                    q + 1 < src_.size() && IsDigit(src_[q + 1])))) {
      ++q;
    }
    return q;
  };
  size_t int_end = digits(p);
  size_t end = int_end;
  bool is_float = false;
  if (end + 1 < src_.size() && src_[end] == '.' && IsDigit(src_[end + 1])) {
    end = digits(end + 1);
    is_float = true;
  }
  if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
    size_t q = end + 1;
    if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
    if (q < src_.size() && IsDigit(src_[q])) {
      end = digits(q);
      is_float = true;
    }
  }
  std::string text;
  for (size_t i = p; i < end; ++i) {
    if (src_[i] != '_') text.push_back(src_[i]);
  }
  Token token;
  token.line = line_;
  token.value = text;
  if (is_float) {
    token.type = TokenType::kFloat;
    token.float_value = std::strtod(text.c_str(), nullptr);
  } else {
    // Hex/octal/binary prefixes.
    int base = 10;
    if (text == "0" && end < src_.size()) {
      char x = src_[end];
      base = (x == 'x' || x == 'X')   ? 16
             : (x == 'o' || x == 'O') ? 8
             : (x == 'b' || x == 'B') ? 2
                                      : 10;
      if (base != 10) {
        size_t q = end + 1;
        text.clear();
        while (q < src_.size() &&
               (std::isxdigit(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) {
          if (src_[q] != '_') text.push_back(src_[q]);
          ++q;
        }
        end = q;
      }
    } else if (text.size() > 1 && text[0] == '0') {
      return Error("invalid integer literal");
    }
    errno = 0;
    char* parse_end = nullptr;
    long long v = std::strtoll(text.c_str(), &parse_end, base);
    if (errno != 0 || text.empty() || *parse_end != '\0') {
      return Error("integer literal out of range or malformed");
    }
    token.type = TokenType::kInteger;
    token.int_value = v;
  }
  tokens_.push_back(std::move(token));
  Advance(end - pos_);
  return absl::OkStatus();
}

std::string NormalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace

absl::StatusOr<std::vector<Token>> Lex(std::string_view source) {
  Lexer lexer(NormalizeNewlines(source));
  return lexer.Run();
}

}  // namespace ringlm::jinja::internal
