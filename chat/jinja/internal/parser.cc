#include "chat/jinja/internal/parser.h"

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "chat/jinja/internal/lexer.h"
#include "chat/jinja/internal/parser_impl.h"
#include "chat/jinja/internal/str_cat.h"

namespace ringlm::jinja::internal {
namespace {

// Tags jinja2 knows that this engine does not implement.
bool IsKnownUnsupportedTag(std::string_view tag) {
  static constexpr std::string_view kTags[] = {
      "include", "import",    "from",       "extends", "block",    "call", "do",
      "trans",   "pluralize", "autoescape", "print",   "endblock", "debug"};
  for (std::string_view t : kTags) {
    if (t == tag) return true;
  }
  return false;
}

}  // namespace

absl::Status Parser::ParseBody(std::initializer_list<std::string_view> ends, Body* body,
                               std::string* end) {
  DepthGuard guard(this);
  if (guard.exceeded()) return DepthError();
  while (true) {
    const Token& tok = Cur();
    switch (tok.type) {
      case TokenType::kEof:
        if (ends.size() == 0) return absl::OkStatus();
        return Fail(Cat("unexpected end of template, expected '", *ends.begin(), "'"));
      case TokenType::kData: {
        auto stmt = std::make_unique<Stmt>();
        stmt->kind = Stmt::Kind::kData;
        stmt->line = tok.line;
        stmt->data = tok.value;
        body->push_back(std::move(stmt));
        Next();
        break;
      }
      case TokenType::kVarBegin: {
        int line = tok.line;
        Next();
        JINJA_PARSE_ASSIGN_OR_RETURN(expr, ParseTuple(true));
        if (Cur().type != TokenType::kVarEnd) {
          return Fail(Cat("expected end of print statement, got ", Describe()));
        }
        Next();
        auto stmt = std::make_unique<Stmt>();
        stmt->kind = Stmt::Kind::kOutput;
        stmt->line = line;
        stmt->expr = std::move(expr);
        body->push_back(std::move(stmt));
        break;
      }
      case TokenType::kBlockBegin: {
        const Token& name = PeekAt(1);
        if (name.type == TokenType::kName) {
          for (std::string_view e : ends) {
            if (name.value == e) {
              Next();
              Next();
              *end = std::string(e);
              return absl::OkStatus();
            }
          }
        }
        JINJA_PARSE_RETURN_IF_ERROR(ParseStatement(body));
        break;
      }
      default:
        return Fail(Cat("unexpected ", Describe()));
    }
  }
}

absl::Status Parser::ParseStatement(Body* body) {
  Next();  // {%
  int line = Cur().line;
  if (Cur().type != TokenType::kName) return Fail("tag name expected");
  std::string tag = Cur().value;
  if (tag == "if") return ParseIf(body, line);
  if (tag == "for") return ParseFor(body, line);
  if (tag == "set") return ParseSet(body, line);
  if (tag == "macro") return ParseMacro(body, line);
  if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) {
      return Fail(Cat("'", tag, "' outside of a loop"));
    }
    Next();
    JINJA_PARSE_RETURN_IF_ERROR(ExpectBlockEnd());
    auto stmt = std::make_unique<Stmt>();
    stmt->kind = tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
    stmt->line = line;
    body->push_back(std::move(stmt));
    return absl::OkStatus();
  }
  if (tag == "filter") {
    Next();
    auto stmt = std::make_unique<Stmt>();
    stmt->kind = Stmt::Kind::kFilterBlock;
    stmt->line = line;
    JINJA_PARSE_ASSIGN_OR_RETURN(filter, ParseFilter(nullptr));
    while (IsOp("|")) {
      Next();
      JINJA_PARSE_ASSIGN_OR_RETURN(more, ParseFilter(std::move(filter)));
      filter = std::move(more);
    }
    stmt->expr = std::move(filter);
    JINJA_PARSE_RETURN_IF_ERROR(ExpectBlockEnd());
    std::string end;
    JINJA_PARSE_RETURN_IF_ERROR(ParseBody({"endfilter"}, &stmt->body, &end));
    JINJA_PARSE_RETURN_IF_ERROR(ExpectBlockEnd());
    body->push_back(std::move(stmt));
    return absl::OkStatus();
  }
  if (tag == "generation" || tag == "with") {
    Next();
    auto stmt = std::make_unique<Stmt>();
    stmt->kind = Stmt::Kind::kScope;
    stmt->line = line;
    stmt->new_scope = tag == "with";
    while (tag == "with" && Cur().type != TokenType::kBlockEnd) {
      if (!stmt->sets.empty()) JINJA_PARSE_RETURN_IF_ERROR(ExpectOp(","));
      JINJA_PARSE_ASSIGN_OR_RETURN(name, ExpectName());
      JINJA_PARSE_RETURN_IF_ERROR(ExpectOp("="));
      JINJA_PARSE_ASSIGN_OR_RETURN(value, ParseExpression());
      stmt->sets.emplace_back(name, std::move(value));
    }
    JINJA_PARSE_RETURN_IF_ERROR(ExpectBlockEnd());
    std::string end;
    std::string end_tag = "end" + tag;
    JINJA_PARSE_RETURN_IF_ERROR(ParseBody({end_tag}, &stmt->body, &end));
    JINJA_PARSE_RETURN_IF_ERROR(ExpectBlockEnd());
    body->push_back(std::move(stmt));
    return absl::OkStatus();
  }
  if (IsKnownUnsupportedTag(tag)) {
    return absl::UnimplementedError(Cat("unsupported Jinja tag '", tag, "' at line ", line));
  }
  static constexpr std::string_view kEnds[] = {"endif",   "endfor",   "else",      "elif",
                                               "endset",  "endmacro", "endfilter", "endgeneration",
                                               "endwith", "endraw"};
  for (std::string_view e : kEnds) {
    if (tag == e) {
      return Fail(Cat("unexpected tag '", tag, "'"));
    }
  }
  return absl::UnimplementedError(Cat("unsupported Jinja tag '", tag, "' at line ", line));
}

absl::Status Parser::ParseIf(Body* body, int line) {
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = Stmt::Kind::kIf;
  stmt->line = line;
  Next();  // if
  while (true) {
    JINJA_PARSE_ASSIGN_OR_RETURN(cond, ParseTuple(false));
    JINJA_PARSE_RETURN_IF_ERROR(ExpectBlockEnd());
    Body branch;
    std::string end;
    JINJA_PARSE_RETURN_IF_ERROR(ParseBody({"elif", "else", "endif"}, &branch, &end));
    stmt->branches.emplace_back(std::move(cond), std::move(branch));
    if (end == "elif") continue;
    if (end == "else") {
      JINJA_PARSE_RETURN_IF_ERROR(ExpectBlockEnd());
      Body else_branch;
      JINJA_PARSE_RETURN_IF_ERROR(ParseBody({"endif"}, &else_branch, &end));
      stmt->branches.emplace_back(nullptr, std::move(else_branch));
    }
    break;
  }
  JINJA_PARSE_RETURN_IF_ERROR(ExpectBlockEnd());
  body->push_back(std::move(stmt));
  return absl::OkStatus();
}

absl::Status Parser::ParseTargets(Stmt* stmt, bool allow_attr) {
  bool parens = IsOp("(");
  if (parens) Next();
  while (true) {
    JINJA_PARSE_ASSIGN_OR_RETURN(name, ExpectName());
    if (allow_attr && IsOp(".") && stmt->targets.empty()) {
      Next();
      JINJA_PARSE_ASSIGN_OR_RETURN(attr, ExpectName());
      stmt->targets.push_back(name);
      stmt->attr = attr;
      return absl::OkStatus();
    }
    stmt->targets.push_back(name);
    if (!IsOp(",")) break;
    stmt->unpack = true;
    Next();
    if (parens && IsOp(")")) break;
    if (!parens && (IsName("in") || IsOp("="))) break;
  }
  if (parens) {
    stmt->unpack = true;
    JINJA_PARSE_RETURN_IF_ERROR(ExpectOp(")"));
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseFor(Body* body, int line) {
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = Stmt::Kind::kFor;
  stmt->line = line;
  Next();  // for
  JINJA_PARSE_RETURN_IF_ERROR(ParseTargets(stmt.get(), false));
  if (!IsName("in")) return Fail("expected 'in' in for loop");
  Next();
  JINJA_PARSE_ASSIGN_OR_RETURN(iter, ParseTuple(false, "recursive"));
  stmt->expr = std::move(iter);
  if (IsName("if")) {
    Next();
    JINJA_PARSE_ASSIGN_OR_RETURN(cond, ParseExpression());
    stmt->cond = std::move(cond);
  }
  if (IsName("recursive")) {
    return absl::UnimplementedError(
        Cat("unsupported Jinja construct 'recursive' for loop at line ", line));
  }
  JINJA_PARSE_RETURN_IF_ERROR(ExpectBlockEnd());
  std::string end;
  ++loop_depth_;
  absl::Status status = ParseBody({"endfor", "else"}, &stmt->body, &end);
  --loop_depth_;
  JINJA_PARSE_RETURN_IF_ERROR(status);
  if (end == "else") {
    JINJA_PARSE_RETURN_IF_ERROR(ExpectBlockEnd());
    int saved = loop_depth_;
    loop_depth_ = 0;  // break/continue are not allowed in for-else
    status = ParseBody({"endfor"}, &stmt->else_body, &end);
    loop_depth_ = saved;
    JINJA_PARSE_RETURN_IF_ERROR(status);
  }
  JINJA_PARSE_RETURN_IF_ERROR(ExpectBlockEnd());
  body->push_back(std::move(stmt));
  return absl::OkStatus();
}

absl::Status Parser::ParseSet(Body* body, int line) {
  auto stmt = std::make_unique<Stmt>();
  stmt->line = line;
  Next();  // set
  JINJA_PARSE_RETURN_IF_ERROR(ParseTargets(stmt.get(), true));
  if (IsOp("=")) {
    Next();
    stmt->kind = Stmt::Kind::kSet;
    JINJA_PARSE_ASSIGN_OR_RETURN(value, ParseTuple(true));
    stmt->expr = std::move(value);
    JINJA_PARSE_RETURN_IF_ERROR(ExpectBlockEnd());
    body->push_back(std::move(stmt));
    return absl::OkStatus();
  }
  if (stmt->unpack || !stmt->attr.empty()) {
    return Fail("a block set takes a single name");
  }
  stmt->kind = Stmt::Kind::kSetBlock;
  if (IsOp("|")) {
    Next();
    JINJA_PARSE_ASSIGN_OR_RETURN(filter, ParseFilter(nullptr));
    while (IsOp("|")) {
      Next();
      JINJA_PARSE_ASSIGN_OR_RETURN(more, ParseFilter(std::move(filter)));
      filter = std::move(more);
    }
    stmt->expr = std::move(filter);
  }
  JINJA_PARSE_RETURN_IF_ERROR(ExpectBlockEnd());
  std::string end;
  JINJA_PARSE_RETURN_IF_ERROR(ParseBody({"endset"}, &stmt->body, &end));
  JINJA_PARSE_RETURN_IF_ERROR(ExpectBlockEnd());
  body->push_back(std::move(stmt));
  return absl::OkStatus();
}

absl::Status Parser::ParseMacro(Body* body, int line) {
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = Stmt::Kind::kMacro;
  stmt->line = line;
  Next();  // macro
  JINJA_PARSE_ASSIGN_OR_RETURN(name, ExpectName());
  stmt->name = name;
  JINJA_PARSE_RETURN_IF_ERROR(ExpectOp("("));
  while (!IsOp(")")) {
    if (!stmt->params.empty()) JINJA_PARSE_RETURN_IF_ERROR(ExpectOp(","));
    if (IsOp(")")) break;
    JINJA_PARSE_ASSIGN_OR_RETURN(param, ExpectName());
    ExprPtr def;
    if (IsOp("=")) {
      Next();
      JINJA_PARSE_ASSIGN_OR_RETURN(value, ParseExpression());
      def = std::move(value);
    } else if (!stmt->defaults.empty() && stmt->defaults.back() != nullptr) {
      return Fail("non-default argument follows default argument");
    }
    stmt->params.push_back(param);
    stmt->defaults.push_back(std::move(def));
  }
  Next();  // )
  JINJA_PARSE_RETURN_IF_ERROR(ExpectBlockEnd());
  int saved = loop_depth_;
  loop_depth_ = 0;
  std::string end;
  absl::Status status = ParseBody({"endmacro"}, &stmt->body, &end);
  loop_depth_ = saved;
  JINJA_PARSE_RETURN_IF_ERROR(status);
  if (Cur().type == TokenType::kName) Next();  // {% endmacro name %}
  JINJA_PARSE_RETURN_IF_ERROR(ExpectBlockEnd());
  body->push_back(std::move(stmt));
  return absl::OkStatus();
}

absl::StatusOr<Body> ParseTemplate(std::string_view source, int max_depth) {
  absl::StatusOr<std::vector<Token>> tokens = Lex(source);
  if (!tokens.ok()) return tokens.status();
  Parser parser(std::move(*tokens), max_depth);
  return parser.ParseAll();
}

}  // namespace ringlm::jinja::internal
