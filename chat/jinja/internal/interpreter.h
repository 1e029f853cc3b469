// Executes a parsed template. One Interpreter serves one render: it owns the
// scopes, the output buffer and the limit counters, and is not shared between
// threads (the program it runs is).
#ifndef RINGLM_CHAT_JINJA_INTERNAL_INTERPRETER_H_
#define RINGLM_CHAT_JINJA_INTERNAL_INTERPRETER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chat/jinja/internal/ast.h"
#include "chat/jinja/internal/objects.h"
#include "chat/jinja/internal/str_cat.h"
#include "chat/jinja/template.h"
#include "chat/jinja/text.h"
#include "chat/jinja/value.h"

namespace ringlm::jinja::internal {

#define JINJA_RETURN_IF_ERROR(expr)    \
  do {                                 \
    absl::Status status_ = (expr);     \
    if (!status_.ok()) return status_; \
  } while (0)
#define JINJA_CONCAT_INNER(a, b) a##b
#define JINJA_CONCAT(a, b) JINJA_CONCAT_INNER(a, b)
#define JINJA_ASSIGN_OR_RETURN(lhs, expr) \
  JINJA_ASSIGN_OR_RETURN_IMPL(JINJA_CONCAT(status_or_, __LINE__), lhs, expr)
#define JINJA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return tmp.status();               \
  lhs = std::move(*tmp)

// "template error at line N: <message>".
absl::Status TemplateErrorImpl(int line, const std::string& message);
template <typename S>
absl::Status TemplateError(int line, const S& message) {
  return TemplateErrorImpl(line, std::string(message));
}
// jinja2's UndefinedError for `v`, and a TypeError, at `line`.
absl::Status UndefinedError(const Value& v, int line);
absl::Status TypeError(int line, std::string_view message);
// Python's type name of a value ("str", "NoneType", ...).
std::string_view PyTypeName(const Value& v);

class Interpreter {
 public:
  explicit Interpreter(const RenderOptions& options);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  absl::StatusOr<Text> Run(const Body& body, const ValueDict& context);

  // Expressions (expressions.cc).
  absl::StatusOr<Value> Eval(const Expr& e);
  absl::StatusOr<Value> GetAttr(const Value& obj, std::string_view name, int line);
  absl::StatusOr<Value> GetItem(const Value& obj, const Value& key, int line);
  absl::StatusOr<Value> Call(const Value& callee, const CallArgs& args);
  absl::StatusOr<Value> Binary(std::string_view op, const Value& a, const Value& b, int line);
  // Python's <, <=, >, >=, ==, !=, in, notin.
  absl::StatusOr<bool> Compare(std::string_view op, const Value& a, const Value& b, int line);
  // Items a for loop / list() / join sees (dict: keys; str: characters).
  absl::StatusOr<ValueList> Iterate(const Value& v, int line);

  // Filters, tests, methods, builtins (filters*.cc, tests.cc, methods.cc).
  absl::StatusOr<Value> ApplyFilter(std::string_view name, const Value& input,
                                    const CallArgs& args);
  // The sequence half of ApplyFilter (filters_sequence.cc).
  absl::StatusOr<Value> ApplySequenceFilter(std::string_view name, const Value& input,
                                            const CallArgs& args);
  absl::StatusOr<bool> ApplyTest(std::string_view name, const Value& input, const CallArgs& args);
  absl::StatusOr<Value> CallMethod(const Value& self, std::string_view name, const CallArgs& args);
  absl::StatusOr<Value> CallMacro(const MacroObject& macro, const CallArgs& args);

  // Limits.
  absl::Status Step(int line) {
    if (++steps_ > options_.max_steps) {
      return absl::ResourceExhaustedError(
          Cat("template evaluation exceeded ", options_.max_steps, " steps at line ", line));
    }
    return absl::OkStatus();
  }
  absl::Status CheckString(size_t bytes, int line) const;
  absl::Status CheckList(size_t items, int line) const;
  // Values stored in a namespace are bounded in nesting, so a loop cannot
  // grow a structure whose destruction would recurse deeply.
  absl::Status CheckStoredDepth(const Value& value, int line) const;
  const RenderOptions& options() const { return options_; }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Scope = absl::flat_hash_map<std::string, Value>;

  absl::Status ExecBody(const Body& body, Flow* flow);
  absl::Status Exec(const Stmt& s, Flow* flow);
  absl::Status ExecFor(const Stmt& s);
  absl::Status ExecSet(const Stmt& s);
  absl::Status Emit(const Text& text, int line);
  // Runs `body` with output captured into *out.
  absl::Status Capture(const Body& body, Text* out);
  absl::Status Assign(const std::vector<std::string>& targets, bool unpack, const Value& value,
                      int line);
  Value Lookup(const std::string& name) const;
  void SetVar(const std::string& name, Value value) { scopes_.back()[name] = std::move(value); }
  absl::StatusOr<Value> EvalSlice(const Expr& e);
  absl::StatusOr<Value> EvalCall(const Expr& e);
  absl::StatusOr<CallArgs> EvalArgs(const Expr& e, size_t first_arg);
  void InstallGlobals(Scope* globals);

  const RenderOptions& options_;
  std::vector<Scope> scopes_;
  Text* out_ = nullptr;
  int64_t steps_ = 0;
  int call_depth_ = 0;
  // Input of the innermost {% filter %} / {% set x | f %} being applied.
  const Value* block_input_ = nullptr;
  // True while `str % value` runs the format filter (Python's operator lets a
  // non-tuple sequence or mapping argument go unused; the filter does not).
  bool percent_operator_ = false;
  // Every namespace() of this render; their attrs are cleared at the end.
  std::vector<std::shared_ptr<NamespaceObject>> namespaces_;
};

}  // namespace ringlm::jinja::internal

#endif  // RINGLM_CHAT_JINJA_INTERNAL_INTERPRETER_H_
