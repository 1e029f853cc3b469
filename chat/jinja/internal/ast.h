// The parsed form of a template: statements holding expressions. Immutable
// after parsing, so one tree is shared by concurrent renders.
#ifndef RINGLM_CHAT_JINJA_INTERNAL_AST_H_
#define RINGLM_CHAT_JINJA_INTERNAL_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace ringlm::jinja::internal {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kList,     // children
    kTuple,    // children
    kDict,     // children: key0, value0, key1, value1, ...
    kGetAttr,  // children[0].name
    kGetItem,  // children[0][children[1]]
    kSlice,    // children[0][c1:c2:c3]; missing parts are null
    kCall,     // children[0](children[1..], kwargs)
    kFilter,   // children[0] | name(children[1..], kwargs); child 0 may be
               // null inside {% filter %}
    kTest,     // children[0] is [not] name(children[1..])
    kNeg,
    kPos,
    kNot,
    kBinary,   // name = "+", "-", "*", "/", "//", "%", "**", "~"
    kCompare,  // children[0] ops[0] children[1] ops[1] children[2] ...
    kAnd,
    kOr,
    kCond,  // children: then, test, else (else may be null)
  };

  Kind kind = Kind::kLiteral;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kData,         // data
    kOutput,       // {{ expr }}
    kIf,           // branches (a null condition is the else branch)
    kFor,          // targets in expr [if cond] body [else else_body]
    kSet,          // targets = expr, or targets[0].attr = expr
    kSetBlock,     // {% set targets[0] [| filter] %} body {% endset %}
    kMacro,        // name(params = defaults) body
    kFilterBlock,  // {% filter expr %} body
    kBreak,
    kContinue,
    kScope,  // {% generation %} body, {% with %} (assignments in `sets`)
  };

  Kind kind = Kind::kData;
  int line = 0;
  std::string data;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::string> targets;
  bool unpack = false;  // targets written as a tuple
  std::string attr;     // set ns.attr
  std::string name;     // macro name
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;                      // aligned with params; null = required
  std::vector<std::pair<std::string, ExprPtr>> sets;  // {% with a = 1 %}
  bool new_scope = false;                             // kScope
};

}  // namespace ringlm::jinja::internal

#endif  // RINGLM_CHAT_JINJA_INTERNAL_AST_H_
