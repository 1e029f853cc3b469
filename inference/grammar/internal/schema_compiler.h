// SchemaCompiler: turns one JSON schema document into grammar nodes of a
// BuilderState. Internal; json_schema.h documents the supported keywords.
#ifndef RINGLM_INFERENCE_GRAMMAR_INTERNAL_SCHEMA_COMPILER_H_
#define RINGLM_INFERENCE_GRAMMAR_INTERNAL_SCHEMA_COMPILER_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "inference/grammar/internal/builder_state.h"
#include "nlohmann/json.hpp"

namespace ringlm::grammar::internal {

// One compiler per schema document (its root resolves "#..." refs). The
// builder state and document must outlive it. Not thread-safe.
class SchemaCompiler {
 public:
  using Json = nlohmann::ordered_json;

  SchemaCompiler(BuilderState* builder, const Json* root) : b_(builder), root_(root) {}

  absl::StatusOr<NodeId> CompileRoot() { return Compile(*root_, 0, 0, "#"); }

 private:
  // `depth` = schema nesting since the last $ref, `ref_depth` = $refs expanded
  // on the way here, `path` = where we are, for error messages.
  absl::StatusOr<NodeId> Compile(const Json& schema, uint32_t depth, uint32_t ref_depth,
                                 const std::string& path);
  absl::StatusOr<NodeId> CompileRef(const Json& ref, uint32_t ref_depth, const std::string& path);
  absl::StatusOr<NodeId> CompileAlternatives(const Json& list, uint32_t depth, uint32_t ref_depth,
                                             const std::string& path);
  absl::StatusOr<NodeId> CompileEnum(const Json& schema, const std::vector<std::string>& types,
                                     const std::string& path);
  absl::StatusOr<NodeId> CompileType(const Json& schema, const std::string& type, uint32_t depth,
                                     uint32_t ref_depth, const std::string& path);
  absl::StatusOr<NodeId> CompileObject(const Json& schema, uint32_t depth, uint32_t ref_depth,
                                       const std::string& path);
  absl::StatusOr<NodeId> CompileArray(const Json& schema, uint32_t depth, uint32_t ref_depth,
                                      const std::string& path);
  absl::StatusOr<NodeId> CompileInteger(const Json& schema, const std::string& path);
  absl::StatusOr<NodeId> CompileString(const Json& schema, const std::string& path);

  BuilderState* b_;
  const Json* root_;
  std::map<std::pair<std::string, uint32_t>, NodeId> refs_;  // (ref, ref_depth) -> node.
};

}  // namespace ringlm::grammar::internal

#endif  // RINGLM_INFERENCE_GRAMMAR_INTERNAL_SCHEMA_COMPILER_H_
