// Early-return helpers for absl::Status / absl::StatusOr, header-only and
// usable from every folder.
#ifndef RINGLM_BASE_STATUS_MACROS_H_
#define RINGLM_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RINGLM_STATUS_CONCAT_INNER_(a, b) a##b
#define RINGLM_STATUS_CONCAT_(a, b) RINGLM_STATUS_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define RINGLM_RETURN_IF_ERROR(expr)            \
  do {                                          \
    if (absl::Status _st = (expr); !_st.ok()) { \
      return _st;                               \
    }                                           \
  } while (0)

// `lhs` may be a declaration (`auto x`) or an existing lvalue.
#define RINGLM_ASSIGN_OR_RETURN(lhs, expr) \
  RINGLM_ASSIGN_OR_RETURN_IMPL_(RINGLM_STATUS_CONCAT_(_statusor_, __LINE__), lhs, expr)

#define RINGLM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(*tmp)

#endif  // RINGLM_BASE_STATUS_MACROS_H_
