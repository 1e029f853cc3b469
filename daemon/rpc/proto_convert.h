// Conversions between wire messages and the library types, and the checks
// that untrusted wire values pass before use.
#ifndef RINGLM_DAEMON_RPC_PROTO_CONVERT_H_
#define RINGLM_DAEMON_RPC_PROTO_CONVERT_H_

#include <grpcpp/support/status.h>

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "inference/sampling/logprobs.h"
#include "inference/sampling/sampling_params.h"
#include "partition/capabilities.h"
#include "partition/ring_partition.h"
#include "proto/ringlm.pb.h"

namespace ringlm {

v1::Capabilities CapabilitiesToProto(const DeviceCapabilities& caps);
DeviceCapabilities CapabilitiesFromProto(const v1::Capabilities& caps);

v1::Plan PlanToProto(const Partition& partition, uint64_t epoch, const std::string& fingerprint,
                     uint32_t n_layers);
// InvalidArgument unless the stages are contiguous, non-empty and cover
// [0, n_layers), and the plan names this model.
absl::Status ValidatePlan(const v1::Plan& plan, uint32_t n_layers, const std::string& fingerprint);
// "node[first,last) ..." for log lines.
std::string DescribePlan(const v1::Plan& plan);

v1::SamplingParams SamplingToProto(const SamplingParams& params);
// Fields left at proto3's zero mean "off"; temperature 0 is greedy.
SamplingParams SamplingFromProto(const v1::SamplingParams& params);

// At most kMaxTopLogprobs alternatives are kept of what a member sent.
TokenLogprobs LogprobsFromProto(const v1::TokenLogprobs& logprobs);
v1::TokenLogprobs LogprobsToProto(const TokenLogprobs& logprobs);

// Hidden states [n_tokens x n_embd] in the given dtype.
v1::Tensor EncodeHidden(const std::vector<float>& values, uint64_t n_tokens, uint64_t n_embd,
                        v1::DType dtype);
// InvalidArgument unless the shape is exactly [n_tokens, n_embd] and the
// byte size matches the dtype.
absl::StatusOr<std::vector<float>> DecodeHidden(const v1::Tensor& tensor, uint64_t n_tokens,
                                                uint64_t n_embd);

// The one place absl codes become gRPC codes (the numbers agree).
grpc::Status ToGrpc(const absl::Status& status);

}  // namespace ringlm

#endif  // RINGLM_DAEMON_RPC_PROTO_CONVERT_H_
