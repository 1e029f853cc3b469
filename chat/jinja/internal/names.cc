#include "chat/jinja/internal/names.h"

#include <algorithm>
#include <initializer_list>

namespace ringlm::jinja::internal {
namespace {
bool In(std::string_view name, std::initializer_list<std::string_view> set) {
  return std::find(set.begin(), set.end(), name) != set.end();
}
}  // namespace

bool IsSupportedFilter(std::string_view name) {
  return In(name,
            {"abs",      "attr",  "batch",  "capitalize", "count",      "d",           "default",
             "dictsort", "e",     "escape", "first",      "float",      "forceescape", "format",
             "indent",   "int",   "items",  "join",       "last",       "length",      "list",
             "lower",    "map",   "max",    "min",        "reject",     "rejectattr",  "replace",
             "reverse",  "round", "safe",   "select",     "selectattr", "sort",        "string",
             "sum",      "title", "tojson", "trim",       "truncate",   "unique",      "upper",
             "wordcount"});
}

bool IsSupportedTest(std::string_view name) {
  return In(
      name,
      {"boolean",  "callable", "defined",  "divisibleby", "eq",   "equalto", "==",  "escaped",
       "even",     "false",    "float",    "ge",          ">=",   "gt",      ">",   "greaterthan",
       "in",       "integer",  "iterable", "le",          "<=",   "lower",   "lt",  "<",
       "lessthan", "mapping",  "ne",       "!=",          "none", "number",  "odd", "sameas",
       "sequence", "string",   "true",     "undefined",   "upper"});
}

}  // namespace ringlm::jinja::internal
