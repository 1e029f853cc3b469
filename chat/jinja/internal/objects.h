// Engine objects a template can hold in a Value: macros, builtin functions,
// bound methods, namespace() and the loop variable.
#ifndef RINGLM_CHAT_JINJA_INTERNAL_OBJECTS_H_
#define RINGLM_CHAT_JINJA_INTERNAL_OBJECTS_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "chat/jinja/internal/ast.h"
#include "chat/jinja/value.h"

namespace ringlm::jinja::internal {

class Interpreter;

// Arguments of a call: positional, then keyword (in call order).
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  int line = 0;

  // args[index] if given, else the keyword `name`, else null.
  const Value* Get(size_t index, std::string_view name) const {
    if (index < args.size()) return &args[index];
    for (const auto& [key, value] : kwargs) {
      if (key == name) return &value;
    }
    return nullptr;
  }
};

using BuiltinFn = std::function<absl::StatusOr<Value>(Interpreter&, const CallArgs&)>;

class BuiltinFunction : public Object {
 public:
  BuiltinFunction(std::string name, BuiltinFn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string_view TypeName() const override { return "builtin_function"; }
  const std::string& name() const { return name_; }
  const BuiltinFn& fn() const { return fn_; }

 private:
  std::string name_;
  BuiltinFn fn_;
};

// A {% macro %}; `def` points into the Template's program, which outlives the
// render.
class MacroObject : public Object {
 public:
  explicit MacroObject(const Stmt* def) : def_(def) {}
  std::string_view TypeName() const override { return "macro"; }
  const Stmt* def() const { return def_; }

 private:
  const Stmt* def_;
};

// `receiver.name` where name is a str/dict/list method.
class BoundMethod : public Object {
 public:
  BoundMethod(Value receiver, std::string name)
      : receiver_(std::move(receiver)), name_(std::move(name)) {}
  std::string_view TypeName() const override { return "method"; }
  uint32_t depth() const override { return receiver_.depth() + 1; }
  const Value& receiver() const { return receiver_; }
  const std::string& name() const { return name_; }

 private:
  Value receiver_;
  std::string name_;
};

// namespace(...): the one mutable object (`set ns.x = ...`). Lives in one
// render only.
class NamespaceObject : public Object {
 public:
  std::string_view TypeName() const override { return "Namespace"; }
  ValueDict& attrs() { return attrs_; }

 private:
  ValueDict attrs_;
};

// The `loop` variable of a for loop.
class LoopObject : public Object {
 public:
  // `depth` is 2 + the deepest item (computed once per loop).
  LoopObject(std::shared_ptr<const ValueList> items, size_t index0, uint32_t depth)
      : items_(std::move(items)), index0_(index0), depth_(depth) {}
  std::string_view TypeName() const override { return "LoopContext"; }
  uint32_t depth() const override { return depth_; }
  // loop.<name>, or Undefined.
  Value Attr(std::string_view name) const;
  size_t index0() const { return index0_; }
  size_t length() const { return items_->size(); }

 private:
  std::shared_ptr<const ValueList> items_;
  size_t index0_;
  uint32_t depth_;
};

}  // namespace ringlm::jinja::internal

#endif  // RINGLM_CHAT_JINJA_INTERNAL_OBJECTS_H_
