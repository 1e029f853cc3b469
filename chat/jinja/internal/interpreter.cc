// Statements: output, if, for, set, macro definitions, filter blocks.
#include "chat/jinja/internal/interpreter.h"

#include <algorithm>
#include <memory>
#include <utility>

namespace ringlm::jinja::internal {

absl::Status TemplateErrorImpl(int line, const std::string& message) {
  return absl::InvalidArgumentError(Cat("template error at line ", line, ": ", message));
}

absl::Status UndefinedError(const Value& v, int line) {
  std::string hint = v.UndefinedHint();
  if (hint.empty()) hint = "value is undefined";
  return TemplateError(line, Cat("UndefinedError: ", hint));
}

absl::Status TypeError(int line, std::string_view message) {
  return TemplateError(line, Cat("TypeError: ", message));
}

std::string_view PyTypeName(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return "Undefined";
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kList:
      return v.is_generator() ? "generator" : v.is_tuple() ? "tuple" : "list";
    case Value::Kind::kDict:
      return "dict";
    case Value::Kind::kObject:
      return v.AsObject()->TypeName();
  }
  return "object";
}

Interpreter::Interpreter(const RenderOptions& options) : options_(options) {}

absl::Status Interpreter::CheckString(size_t bytes, int line) const {
  if (bytes > options_.max_output_bytes) {
    return absl::ResourceExhaustedError(
        Cat("template string exceeds ", options_.max_output_bytes, " bytes at line ", line));
  }
  return absl::OkStatus();
}

absl::Status Interpreter::CheckList(size_t items, int line) const {
  if (items > options_.max_list_items) {
    return absl::ResourceExhaustedError(
        Cat("template list exceeds ", options_.max_list_items, " items at line ", line));
  }
  return absl::OkStatus();
}

absl::StatusOr<Text> Interpreter::Run(const Body& body, const ValueDict& context) {
  scopes_.clear();
  scopes_.emplace_back();
  InstallGlobals(&scopes_.back());
  scopes_.emplace_back();
  for (const auto& [key, value] : context.items()) scopes_.back()[key] = value;
  Text out;
  out_ = &out;
  Flow flow = Flow::kNormal;
  JINJA_RETURN_IF_ERROR(ExecBody(body, &flow));
  return out;
}

Value Interpreter::Lookup(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    auto found = it->find(name);
    if (found != it->end()) return found->second;
  }
  return Value::Undefined(Cat("'", name, "' is undefined"));
}

absl::Status Interpreter::Emit(const Text& text, int line) {
  JINJA_RETURN_IF_ERROR(CheckString(out_->size() + text.size(), line));
  out_->Append(text);
  return absl::OkStatus();
}

absl::Status Interpreter::Capture(const Body& body, Text* out) {
  Text* saved = out_;
  out_ = out;
  Flow flow = Flow::kNormal;
  absl::Status status = ExecBody(body, &flow);
  out_ = saved;
  return status;
}

absl::Status Interpreter::ExecBody(const Body& body, Flow* flow) {
  for (const StmtPtr& stmt : body) {
    JINJA_RETURN_IF_ERROR(Exec(*stmt, flow));
    if (*flow != Flow::kNormal) return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status Interpreter::Exec(const Stmt& s, Flow* flow) {
  JINJA_RETURN_IF_ERROR(Step(s.line));
  switch (s.kind) {
    case Stmt::Kind::kData:
      return Emit(Text(s.data, true), s.line);
    case Stmt::Kind::kOutput: {
      JINJA_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
      return Emit(v.ToText(), s.line);
    }
    case Stmt::Kind::kIf:
      for (const auto& [cond, branch] : s.branches) {
        bool take = true;
        if (cond != nullptr) {
          JINJA_ASSIGN_OR_RETURN(Value v, Eval(*cond));
          take = v.Truthy();
        }
        if (take) return ExecBody(branch, flow);
      }
      return absl::OkStatus();
    case Stmt::Kind::kFor:
      return ExecFor(s);
    case Stmt::Kind::kSet:
      return ExecSet(s);
    case Stmt::Kind::kSetBlock: {
      Text captured;
      JINJA_RETURN_IF_ERROR(Capture(s.body, &captured));
      Value value = Value::String(std::move(captured));
      if (s.expr != nullptr) {
        const Value* saved = block_input_;
        block_input_ = &value;
        absl::StatusOr<Value> filtered = Eval(*s.expr);
        block_input_ = saved;
        if (!filtered.ok()) return filtered.status();
        value = std::move(*filtered);
      }
      SetVar(s.targets[0], std::move(value));
      return absl::OkStatus();
    }
    case Stmt::Kind::kMacro:
      SetVar(s.name, Value::FromObject(std::make_shared<MacroObject>(&s)));
      return absl::OkStatus();
    case Stmt::Kind::kFilterBlock: {
      Text captured;
      JINJA_RETURN_IF_ERROR(Capture(s.body, &captured));
      Value value = Value::String(std::move(captured));
      const Value* saved = block_input_;
      block_input_ = &value;
      absl::StatusOr<Value> filtered = Eval(*s.expr);
      block_input_ = saved;
      if (!filtered.ok()) return filtered.status();
      return Emit(filtered->ToText(), s.line);
    }
    case Stmt::Kind::kBreak:
      *flow = Flow::kBreak;
      return absl::OkStatus();
    case Stmt::Kind::kContinue:
      *flow = Flow::kContinue;
      return absl::OkStatus();
    case Stmt::Kind::kScope: {
      if (!s.new_scope) return ExecBody(s.body, flow);
      Scope scope;
      for (const auto& [name, expr] : s.sets) {
        JINJA_ASSIGN_OR_RETURN(Value v, Eval(*expr));
        scope[name] = std::move(v);
      }
      scopes_.push_back(std::move(scope));
      absl::Status status = ExecBody(s.body, flow);
      scopes_.pop_back();
      return status;
    }
  }
  return absl::OkStatus();
}

absl::Status Interpreter::Assign(const std::vector<std::string>& targets, bool unpack,
                                 const Value& value, int line) {
  if (!unpack) {
    SetVar(targets[0], value);
    return absl::OkStatus();
  }
  JINJA_ASSIGN_OR_RETURN(ValueList items, Iterate(value, line));
  if (items.size() != targets.size()) {
    return TemplateError(
        line, items.size() < targets.size()
                  ? Cat("not enough values to unpack (expected ", targets.size(), ", got ",
                        items.size(), ")")
                  : Cat("too many values to unpack (expected ", targets.size(), ")"));
  }
  for (size_t i = 0; i < targets.size(); ++i) SetVar(targets[i], items[i]);
  return absl::OkStatus();
}

absl::Status Interpreter::ExecSet(const Stmt& s) {
  JINJA_ASSIGN_OR_RETURN(Value value, Eval(*s.expr));
  if (s.attr.empty()) return Assign(s.targets, s.unpack, value, s.line);
  Value ns = Lookup(s.targets[0]);
  auto* object = ns.is_object() ? dynamic_cast<NamespaceObject*>(ns.AsObject().get()) : nullptr;
  if (object == nullptr) {
    return TemplateError(s.line, "cannot assign attribute on non-namespace object");
  }
  JINJA_RETURN_IF_ERROR(CheckStoredDepth(value, s.line));
  object->attrs().Set(s.attr, std::move(value));
  return absl::OkStatus();
}

absl::Status Interpreter::ExecFor(const Stmt& s) {
  JINJA_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr));
  JINJA_ASSIGN_OR_RETURN(ValueList all, Iterate(iterable, s.line));
  auto items = std::make_shared<ValueList>();
  if (s.cond == nullptr) {
    *items = std::move(all);
  } else {
    for (Value& item : all) {
      JINJA_RETURN_IF_ERROR(Step(s.line));
      scopes_.emplace_back();
      absl::Status status = Assign(s.targets, s.unpack, item, s.line);
      absl::StatusOr<Value> keep = status.ok() ? Eval(*s.cond) : absl::StatusOr<Value>(status);
      scopes_.pop_back();
      if (!keep.ok()) return keep.status();
      if (keep->Truthy()) items->push_back(std::move(item));
    }
  }
  if (items->empty()) {
    Flow flow = Flow::kNormal;
    return ExecBody(s.else_body, &flow);
  }
  std::shared_ptr<const ValueList> shared = items;
  uint32_t depth = 0;
  for (const Value& item : *shared) depth = std::max(depth, item.depth());
  depth += 2;
  for (size_t i = 0; i < shared->size(); ++i) {
    JINJA_RETURN_IF_ERROR(Step(s.line));
    scopes_.emplace_back();
    absl::Status status = Assign(s.targets, s.unpack, (*shared)[i], s.line);
    Flow flow = Flow::kNormal;
    if (status.ok()) {
      SetVar("loop", Value::FromObject(std::make_shared<LoopObject>(shared, i, depth)));
      status = ExecBody(s.body, &flow);
    }
    scopes_.pop_back();
    JINJA_RETURN_IF_ERROR(status);
    if (flow == Flow::kBreak) break;
  }
  return absl::OkStatus();
}

}  // namespace ringlm::jinja::internal
