// Expressions, with jinja2.parser's precedence: condexpr < or < and < not
// < compare < + - < ~ < * / // % < ** < unary < postfix and filters.
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "chat/jinja/internal/names.h"
#include "chat/jinja/internal/parser_impl.h"
#include "chat/jinja/internal/str_cat.h"

namespace ringlm::jinja::internal {

absl::StatusOr<ExprPtr> Parser::ParseTuple(bool with_condexpr, std::string_view extra_end,
                                           bool explicit_parens) {
  int line = Cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) JINJA_PARSE_RETURN_IF_ERROR(ExpectOp(","));
    TokenType t = Cur().type;
    if (t == TokenType::kVarEnd || t == TokenType::kBlockEnd || IsOp(")") ||
        (!extra_end.empty() && IsName(extra_end))) {
      break;
    }
    JINJA_PARSE_ASSIGN_OR_RETURN(item, ParseExpression(with_condexpr));
    items.push_back(std::move(item));
    if (IsOp(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parens) {
      return Fail(Cat("expected an expression, got ", Describe()));
    }
  }
  ExprPtr tuple = NewExpr(Expr::Kind::kTuple, line);
  tuple->children = std::move(items);
  return tuple;
}

absl::StatusOr<ExprPtr> Parser::ParseExpression(bool with_condexpr) {
  DepthGuard guard(this);
  if (guard.exceeded()) return DepthError();
  if (!with_condexpr) return ParseOr();
  JINJA_PARSE_ASSIGN_OR_RETURN(expr, ParseOr());
  while (IsName("if")) {
    int line = Cur().line;
    Next();
    JINJA_PARSE_ASSIGN_OR_RETURN(test, ParseOr());
    ExprPtr else_expr;
    if (IsName("else")) {
      Next();
      JINJA_PARSE_ASSIGN_OR_RETURN(e, ParseExpression(true));
      else_expr = std::move(e);
    }
    ExprPtr cond = NewExpr(Expr::Kind::kCond, line);
    cond->children.push_back(std::move(expr));
    cond->children.push_back(std::move(test));
    cond->children.push_back(std::move(else_expr));
    expr = std::move(cond);
  }
  return expr;
}

absl::StatusOr<ExprPtr> Parser::ParseOr() {
  JINJA_PARSE_ASSIGN_OR_RETURN(left, ParseAnd());
  while (IsName("or")) {
    int line = Cur().line;
    Next();
    JINJA_PARSE_ASSIGN_OR_RETURN(right, ParseAnd());
    ExprPtr node = NewExpr(Expr::Kind::kOr, line);
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseAnd() {
  JINJA_PARSE_ASSIGN_OR_RETURN(left, ParseNot());
  while (IsName("and")) {
    int line = Cur().line;
    Next();
    JINJA_PARSE_ASSIGN_OR_RETURN(right, ParseNot());
    ExprPtr node = NewExpr(Expr::Kind::kAnd, line);
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseNot() {
  if (IsName("not")) {
    DepthGuard guard(this);
    if (guard.exceeded()) return DepthError();
    int line = Cur().line;
    Next();
    JINJA_PARSE_ASSIGN_OR_RETURN(operand, ParseNot());
    ExprPtr node = NewExpr(Expr::Kind::kNot, line);
    node->children.push_back(std::move(operand));
    return node;
  }
  return ParseCompare();
}

absl::StatusOr<ExprPtr> Parser::ParseCompare() {
  int line = Cur().line;
  JINJA_PARSE_ASSIGN_OR_RETURN(first, ParseMath1());
  ExprPtr node;
  while (true) {
    std::string op;
    if (Cur().type == TokenType::kOperator &&
        (Cur().value == "==" || Cur().value == "!=" || Cur().value == "<" || Cur().value == ">" ||
         Cur().value == "<=" || Cur().value == ">=")) {
      op = Cur().value;
      Next();
    } else if (IsName("in")) {
      op = "in";
      Next();
    } else if (IsName("not") && PeekAt(1).type == TokenType::kName && PeekAt(1).value == "in") {
      op = "notin";
      Next();
      Next();
    } else {
      break;
    }
    JINJA_PARSE_ASSIGN_OR_RETURN(operand, ParseMath1());
    if (node == nullptr) {
      node = NewExpr(Expr::Kind::kCompare, line);
      node->children.push_back(std::move(first));
    }
    node->ops.push_back(op);
    node->children.push_back(std::move(operand));
  }
  if (node == nullptr) return first;
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParseMath1() {
  JINJA_PARSE_ASSIGN_OR_RETURN(left, ParseConcat());
  while (IsOp("+") || IsOp("-")) {
    ExprPtr node = NewExpr(Expr::Kind::kBinary, Cur().line);
    node->name = Cur().value;
    Next();
    JINJA_PARSE_ASSIGN_OR_RETURN(right, ParseConcat());
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseConcat() {
  JINJA_PARSE_ASSIGN_OR_RETURN(left, ParseMath2());
  while (IsOp("~")) {
    ExprPtr node = NewExpr(Expr::Kind::kBinary, Cur().line);
    node->name = "~";
    Next();
    JINJA_PARSE_ASSIGN_OR_RETURN(right, ParseMath2());
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseMath2() {
  JINJA_PARSE_ASSIGN_OR_RETURN(left, ParsePow());
  while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
    ExprPtr node = NewExpr(Expr::Kind::kBinary, Cur().line);
    node->name = Cur().value;
    Next();
    JINJA_PARSE_ASSIGN_OR_RETURN(right, ParsePow());
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParsePow() {
  JINJA_PARSE_ASSIGN_OR_RETURN(left, ParseUnary(true));
  while (IsOp("**")) {
    ExprPtr node = NewExpr(Expr::Kind::kBinary, Cur().line);
    node->name = "**";
    Next();
    JINJA_PARSE_ASSIGN_OR_RETURN(right, ParseUnary(true));
    node->children.push_back(std::move(left));
    node->children.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

absl::StatusOr<ExprPtr> Parser::ParseUnary(bool with_filter) {
  DepthGuard guard(this);
  if (guard.exceeded()) return DepthError();
  ExprPtr node;
  if (IsOp("-") || IsOp("+")) {
    node = NewExpr(IsOp("-") ? Expr::Kind::kNeg : Expr::Kind::kPos, Cur().line);
    Next();
    JINJA_PARSE_ASSIGN_OR_RETURN(operand, ParseUnary(false));
    node->children.push_back(std::move(operand));
  } else {
    JINJA_PARSE_ASSIGN_OR_RETURN(primary, ParsePrimary());
    node = std::move(primary);
  }
  JINJA_PARSE_ASSIGN_OR_RETURN(post, ParsePostfix(std::move(node)));
  if (!with_filter) return post;
  return ParseFilterExpr(std::move(post));
}

absl::StatusOr<ExprPtr> Parser::ParsePrimary() {
  const Token& tok = Cur();
  int line = tok.line;
  switch (tok.type) {
    case TokenType::kName: {
      ExprPtr node = NewExpr(Expr::Kind::kLiteral, line);
      const std::string& n = tok.value;
      if (n == "true" || n == "True") {
        node->literal = Value::Bool(true);
      } else if (n == "false" || n == "False") {
        node->literal = Value::Bool(false);
      } else if (n == "none" || n == "None") {
        node->literal = Value::None();
      } else {
        node->kind = Expr::Kind::kName;
        node->name = n;
      }
      Next();
      return node;
    }
    case TokenType::kString: {
      std::string s = tok.value;
      Next();
      while (Cur().type == TokenType::kString) {
        s += Cur().value;
        Next();
      }
      ExprPtr node = NewExpr(Expr::Kind::kLiteral, line);
      node->literal = Value::String(s, true);
      return node;
    }
    case TokenType::kInteger: {
      ExprPtr node = NewExpr(Expr::Kind::kLiteral, line);
      node->literal = Value::Int(tok.int_value);
      Next();
      return node;
    }
    case TokenType::kFloat: {
      ExprPtr node = NewExpr(Expr::Kind::kLiteral, line);
      node->literal = Value::Float(tok.float_value);
      Next();
      return node;
    }
    case TokenType::kOperator:
      if (tok.value == "(") {
        Next();
        JINJA_PARSE_ASSIGN_OR_RETURN(inner, ParseTuple(true, "", true));
        JINJA_PARSE_RETURN_IF_ERROR(ExpectOp(")"));
        return inner;
      }
      if (tok.value == "[") {
        Next();
        ExprPtr node = NewExpr(Expr::Kind::kList, line);
        while (!IsOp("]")) {
          if (!node->children.empty()) JINJA_PARSE_RETURN_IF_ERROR(ExpectOp(","));
          if (IsOp("]")) break;
          JINJA_PARSE_ASSIGN_OR_RETURN(item, ParseExpression());
          node->children.push_back(std::move(item));
        }
        Next();
        return node;
      }
      if (tok.value == "{") {
        Next();
        ExprPtr node = NewExpr(Expr::Kind::kDict, line);
        while (!IsOp("}")) {
          if (!node->children.empty()) JINJA_PARSE_RETURN_IF_ERROR(ExpectOp(","));
          if (IsOp("}")) break;
          JINJA_PARSE_ASSIGN_OR_RETURN(key, ParseExpression());
          JINJA_PARSE_RETURN_IF_ERROR(ExpectOp(":"));
          JINJA_PARSE_ASSIGN_OR_RETURN(value, ParseExpression());
          node->children.push_back(std::move(key));
          node->children.push_back(std::move(value));
        }
        Next();
        return node;
      }
      break;
    default:
      break;
  }
  return Fail(Cat("unexpected ", Describe()));
}

absl::StatusOr<ExprPtr> Parser::ParsePostfix(ExprPtr node) {
  while (true) {
    int line = Cur().line;
    if (IsOp(".")) {
      Next();
      if (Cur().type == TokenType::kName) {
        ExprPtr attr = NewExpr(Expr::Kind::kGetAttr, line);
        attr->name = Cur().value;
        attr->children.push_back(std::move(node));
        node = std::move(attr);
        Next();
      } else if (Cur().type == TokenType::kInteger) {
        ExprPtr item = NewExpr(Expr::Kind::kGetItem, line);
        ExprPtr index = NewExpr(Expr::Kind::kLiteral, line);
        index->literal = Value::Int(Cur().int_value);
        item->children.push_back(std::move(node));
        item->children.push_back(std::move(index));
        node = std::move(item);
        Next();
      } else {
        return Fail("expected name or number after '.'");
      }
    } else if (IsOp("[")) {
      Next();
      std::vector<ExprPtr> args;
      while (!IsOp("]")) {
        if (!args.empty()) JINJA_PARSE_RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp("]")) break;
        JINJA_PARSE_ASSIGN_OR_RETURN(arg, ParseSubscribed());
        args.push_back(std::move(arg));
      }
      Next();
      if (args.empty()) return Fail("expected a subscript");
      ExprPtr sub;
      if (args.size() == 1 && args[0]->kind == Expr::Kind::kSlice) {
        sub = std::move(args[0]);
        sub->children[0] = std::move(node);
      } else {
        sub = NewExpr(Expr::Kind::kGetItem, line);
        sub->children.push_back(std::move(node));
        if (args.size() == 1) {
          sub->children.push_back(std::move(args[0]));
        } else {
          ExprPtr tuple = NewExpr(Expr::Kind::kTuple, line);
          tuple->children = std::move(args);
          sub->children.push_back(std::move(tuple));
        }
      }
      node = std::move(sub);
    } else if (IsOp("(")) {
      ExprPtr call = NewExpr(Expr::Kind::kCall, line);
      call->children.push_back(std::move(node));
      JINJA_PARSE_RETURN_IF_ERROR(ParseCallArgs(call.get()));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> Parser::ParseSubscribed() {
  int line = Cur().line;
  ExprPtr start;
  if (!IsOp(":")) {
    JINJA_PARSE_ASSIGN_OR_RETURN(expr, ParseExpression());
    if (!IsOp(":")) return expr;
    start = std::move(expr);
  }
  Next();  // :
  ExprPtr slice = NewExpr(Expr::Kind::kSlice, line);
  slice->children.push_back(nullptr);  // the object, filled in by the caller
  slice->children.push_back(std::move(start));
  ExprPtr stop;
  ExprPtr step;
  if (!IsOp("]") && !IsOp(",") && !IsOp(":")) {
    JINJA_PARSE_ASSIGN_OR_RETURN(e, ParseExpression());
    stop = std::move(e);
  }
  if (IsOp(":")) {
    Next();
    if (!IsOp("]") && !IsOp(",")) {
      JINJA_PARSE_ASSIGN_OR_RETURN(e, ParseExpression());
      step = std::move(e);
    }
  }
  slice->children.push_back(std::move(stop));
  slice->children.push_back(std::move(step));
  return slice;
}

absl::Status Parser::ParseCallArgs(Expr* call) {
  JINJA_PARSE_RETURN_IF_ERROR(ExpectOp("("));
  bool first = true;
  while (!IsOp(")")) {
    if (!first) JINJA_PARSE_RETURN_IF_ERROR(ExpectOp(","));
    first = false;
    if (IsOp(")")) break;
    if (IsOp("*") || IsOp("**")) {
      return absl::UnimplementedError(
          Cat("unsupported Jinja construct '*args/**kwargs' at line ", Cur().line));
    }
    if (Cur().type == TokenType::kName && PeekAt(1).type == TokenType::kOperator &&
        PeekAt(1).value == "=") {
      std::string key = Cur().value;
      Next();
      Next();
      JINJA_PARSE_ASSIGN_OR_RETURN(value, ParseExpression());
      call->kwargs.emplace_back(key, std::move(value));
    } else {
      if (!call->kwargs.empty()) {
        return Fail("positional argument after keyword argument");
      }
      JINJA_PARSE_ASSIGN_OR_RETURN(value, ParseExpression());
      call->children.push_back(std::move(value));
    }
  }
  Next();  // )
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> Parser::ParseFilterExpr(ExprPtr node) {
  while (true) {
    if (IsOp("|")) {
      Next();
      JINJA_PARSE_ASSIGN_OR_RETURN(f, ParseFilter(std::move(node)));
      node = std::move(f);
    } else if (IsName("is")) {
      Next();
      JINJA_PARSE_ASSIGN_OR_RETURN(t, ParseTest(std::move(node)));
      node = std::move(t);
    } else if (IsOp("(")) {
      ExprPtr call = NewExpr(Expr::Kind::kCall, Cur().line);
      call->children.push_back(std::move(node));
      JINJA_PARSE_RETURN_IF_ERROR(ParseCallArgs(call.get()));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

absl::StatusOr<ExprPtr> Parser::ParseFilter(ExprPtr input) {
  DepthGuard guard(this);
  if (guard.exceeded()) return DepthError();
  ExprPtr node = NewExpr(Expr::Kind::kFilter, Cur().line);
  JINJA_PARSE_ASSIGN_OR_RETURN(name, ExpectName());
  while (IsOp(".")) {
    Next();
    JINJA_PARSE_ASSIGN_OR_RETURN(part, ExpectName());
    name += "." + part;
  }
  if (!IsSupportedFilter(name)) {
    return absl::UnimplementedError(
        Cat("unsupported Jinja filter '", name, "' at line ", node->line));
  }
  node->name = name;
  node->children.push_back(std::move(input));
  if (IsOp("(")) JINJA_PARSE_RETURN_IF_ERROR(ParseCallArgs(node.get()));
  return node;
}

absl::StatusOr<ExprPtr> Parser::ParseTest(ExprPtr input) {
  DepthGuard guard(this);
  if (guard.exceeded()) return DepthError();
  ExprPtr node = NewExpr(Expr::Kind::kTest, Cur().line);
  if (IsName("not")) {
    node->negated = true;
    Next();
  }
  JINJA_PARSE_ASSIGN_OR_RETURN(name, ExpectName());
  while (IsOp(".")) {
    Next();
    JINJA_PARSE_ASSIGN_OR_RETURN(part, ExpectName());
    name += "." + part;
  }
  if (!IsSupportedTest(name)) {
    return absl::UnimplementedError(
        Cat("unsupported Jinja test '", name, "' at line ", node->line));
  }
  node->name = name;
  node->children.push_back(std::move(input));
  if (IsOp("(")) {
    JINJA_PARSE_RETURN_IF_ERROR(ParseCallArgs(node.get()));
  } else {
    TokenType t = Cur().type;
    bool arg_start = t == TokenType::kName || t == TokenType::kString || t == TokenType::kInteger ||
                     t == TokenType::kFloat || IsOp("[") || IsOp("{");
    if (arg_start && !IsName("else") && !IsName("or") && !IsName("and")) {
      if (IsName("is")) return Fail("You cannot chain multiple tests with is");
      JINJA_PARSE_ASSIGN_OR_RETURN(primary, ParsePrimary());
      JINJA_PARSE_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(primary)));
      node->children.push_back(std::move(arg));
    }
  }
  return node;
}

}  // namespace ringlm::jinja::internal
