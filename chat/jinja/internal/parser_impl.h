// The parser class behind ParseTemplate (parser.h): statements in
// parser.cc, expressions in parser_expressions.cc. Internal to the engine.
#ifndef RINGLM_CHAT_JINJA_INTERNAL_PARSER_IMPL_H_
#define RINGLM_CHAT_JINJA_INTERNAL_PARSER_IMPL_H_

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chat/jinja/internal/ast.h"
#include "chat/jinja/internal/lexer.h"
#include "chat/jinja/internal/str_cat.h"

namespace ringlm::jinja::internal {

// One parse of one token stream; not reusable, not thread-safe.
class Parser {
 public:
  Parser(std::vector<Token> tokens, int max_depth)
      : tokens_(std::move(tokens)), max_depth_(max_depth) {}

  absl::StatusOr<Body> ParseAll() {
    Body body;
    std::string end;
    absl::Status status = ParseBody({}, &body, &end);
    if (!status.ok()) return status;
    return body;
  }

 private:
  // RAII depth counter: parsing deeper than max_depth_ fails.
  class DepthGuard {
   public:
    explicit DepthGuard(Parser* p) : p_(p) { ++p_->depth_; }
    ~DepthGuard() { --p_->depth_; }
    bool exceeded() const { return p_->depth_ > p_->max_depth_; }

   private:
    Parser* p_;
  };

  const Token& Cur() const { return tokens_[pos_]; }
  const Token& PeekAt(size_t ahead) const {
    size_t i = pos_ + ahead;
    return tokens_[i < tokens_.size() ? i : tokens_.size() - 1];
  }
  void Next() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool IsOp(std::string_view op) const {
    return Cur().type == TokenType::kOperator && Cur().value == op;
  }
  bool IsName(std::string_view name) const {
    return Cur().type == TokenType::kName && Cur().value == name;
  }
  absl::Status Fail(std::string_view message) const {
    return absl::InvalidArgumentError(
        Cat("template syntax error at line ", Cur().line, ": ", message));
  }
  absl::Status DepthError() const {
    return absl::ResourceExhaustedError(
        Cat("template nesting deeper than ", max_depth_, " at line ", Cur().line));
  }
  std::string Describe() const {
    switch (Cur().type) {
      case TokenType::kEof:
        return "end of template";
      case TokenType::kBlockEnd:
        return "end of statement block";
      case TokenType::kVarEnd:
        return "end of print statement";
      case TokenType::kData:
        return "template data";
      default:
        return Cat("'", Cur().value, "'");
    }
  }
  absl::Status ExpectOp(std::string_view op) {
    if (!IsOp(op)) {
      return Fail(Cat("expected '", op, "', got ", Describe()));
    }
    Next();
    return absl::OkStatus();
  }
  absl::Status ExpectBlockEnd() {
    if (Cur().type != TokenType::kBlockEnd) {
      return Fail(Cat("expected end of statement block, got ", Describe()));
    }
    Next();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Cur().type != TokenType::kName) {
      return Fail(Cat("expected a name, got ", Describe()));
    }
    std::string name = Cur().value;
    Next();
    return name;
  }

  ExprPtr NewExpr(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // Parses statements until a block tag named in `ends`; leaves the stream
  // after that tag's name and stores it in *end.
  absl::Status ParseBody(std::initializer_list<std::string_view> ends, Body* body,
                         std::string* end);
  absl::Status ParseStatement(Body* body);
  absl::Status ParseIf(Body* body, int line);
  absl::Status ParseFor(Body* body, int line);
  absl::Status ParseSet(Body* body, int line);
  absl::Status ParseMacro(Body* body, int line);
  absl::Status ParseTargets(Stmt* stmt, bool allow_attr);

  absl::StatusOr<ExprPtr> ParseTuple(bool with_condexpr, std::string_view extra_end = "",
                                     bool explicit_parens = false);
  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr = true);
  absl::StatusOr<ExprPtr> ParseOr();
  absl::StatusOr<ExprPtr> ParseAnd();
  absl::StatusOr<ExprPtr> ParseNot();
  absl::StatusOr<ExprPtr> ParseCompare();
  absl::StatusOr<ExprPtr> ParseMath1();
  absl::StatusOr<ExprPtr> ParseConcat();
  absl::StatusOr<ExprPtr> ParseMath2();
  absl::StatusOr<ExprPtr> ParsePow();
  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter);
  absl::StatusOr<ExprPtr> ParsePrimary();
  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseFilterExpr(ExprPtr node);
  absl::StatusOr<ExprPtr> ParseSubscribed();
  absl::StatusOr<ExprPtr> ParseFilter(ExprPtr input);
  absl::StatusOr<ExprPtr> ParseTest(ExprPtr input);
  absl::Status ParseCallArgs(Expr* call);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int max_depth_;
  int depth_ = 0;
  int loop_depth_ = 0;
};

#define JINJA_PARSE_RETURN_IF_ERROR(expr) \
  do {                                    \
    absl::Status status_ = (expr);        \
    if (!status_.ok()) return status_;    \
  } while (0)
#define JINJA_PARSE_ASSIGN_OR_RETURN(lhs, expr) \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto lhs = std::move(*lhs##_or)

}  // namespace ringlm::jinja::internal

#endif  // RINGLM_CHAT_JINJA_INTERNAL_PARSER_IMPL_H_
