#include "daemon/outsider_gate.h"

#include <string_view>

#include "security/bearer_token.h"

namespace ringlm {
namespace {

// The value of header `key`, or empty.
std::string_view Value(const grpc::AuthMetadataProcessor::InputMetadata& metadata,
                       std::string_view key) {
  auto it = metadata.find(grpc::string_ref(key.data(), key.size()));
  if (it == metadata.end()) return "";
  return std::string_view(it->second.data(), it->second.size());
}

}  // namespace

grpc::Status OutsiderGate::Process(const InputMetadata& metadata, grpc::AuthContext* context,
                                   OutputMetadata* /*consumed*/, OutputMetadata* /*response*/) {
  if (context->IsPeerAuthenticated()) return grpc::Status::OK;
  if (!api_key_.empty() && Value(metadata, ":path") == "/ringlm.v1.RingNode/Generate" &&
      BearerMatches(Value(metadata, "authorization"), api_key_)) {
    return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "this node serves members of its cluster only: present a certificate "
                      "issued from the cluster key");
}

}  // namespace ringlm
