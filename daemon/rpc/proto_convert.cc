#include "daemon/rpc/proto_convert.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "inference/ops/fp16.h"

namespace ringlm {

v1::Capabilities CapabilitiesToProto(const DeviceCapabilities& caps) {
  v1::Capabilities p;
  p.set_total_memory_bytes(caps.total_memory_bytes);
  p.set_usable_memory_bytes(caps.usable_memory_bytes);
  p.set_matmul_gflops(caps.matmul_gflops);
  p.set_cpu_model(caps.cpu_model);
  p.set_threads(caps.threads);
  p.set_read_gbps(caps.read_gbps);
  p.set_placement(caps.placement == Placement::kSpeed ? v1::PLACEMENT_SPEED : v1::PLACEMENT_MEMORY);
  return p;
}

DeviceCapabilities CapabilitiesFromProto(const v1::Capabilities& p) {
  DeviceCapabilities caps;
  caps.total_memory_bytes = p.total_memory_bytes();
  caps.usable_memory_bytes = p.usable_memory_bytes();
  caps.matmul_gflops = p.matmul_gflops();
  caps.cpu_model = p.cpu_model().substr(0, 256);
  caps.threads = p.threads();
  // A figure that cannot be a bandwidth is unknown; a placement other than
  // speed is memory (what a node that says nothing gets).
  caps.read_gbps = std::isfinite(p.read_gbps()) && p.read_gbps() > 0 ? p.read_gbps() : 0;
  caps.placement = p.placement() == v1::PLACEMENT_SPEED ? Placement::kSpeed : Placement::kMemory;
  return caps;
}

v1::Plan PlanToProto(const Partition& partition, uint64_t epoch, const std::string& fingerprint,
                     uint32_t n_layers) {
  v1::Plan plan;
  plan.set_epoch(epoch);
  plan.set_model_fingerprint(fingerprint);
  plan.set_n_layers(n_layers);
  for (const Stage& s : partition.stages) {
    v1::PlanStage* p = plan.add_stages();
    p->set_node_id(s.node_id);
    p->set_address(s.address);
    p->set_first_layer(s.first_layer);
    p->set_last_layer(s.last_layer);
  }
  return plan;
}

std::string DescribePlan(const v1::Plan& plan) {
  std::string out;
  for (const v1::PlanStage& s : plan.stages()) {
    absl::StrAppend(&out, out.empty() ? "" : " ", s.node_id(), "[", s.first_layer(), ",",
                    s.last_layer(), ")");
  }
  return out;
}

absl::Status ValidatePlan(const v1::Plan& plan, uint32_t n_layers, const std::string& fingerprint) {
  if (plan.model_fingerprint() != fingerprint) {
    return absl::InvalidArgumentError(absl::StrCat("plan is for model '", plan.model_fingerprint(),
                                                   "', this node runs '", fingerprint, "'"));
  }
  if (plan.stages_size() == 0) return absl::InvalidArgumentError("plan has no stages");
  if (static_cast<uint32_t>(plan.stages_size()) > n_layers) {
    return absl::InvalidArgumentError("plan has more stages than the model has layers");
  }
  uint32_t next = 0;
  for (int i = 0; i < plan.stages_size(); ++i) {
    const v1::PlanStage& s = plan.stages(i);
    if (s.first_layer() != next || s.last_layer() <= s.first_layer() || s.last_layer() > n_layers) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan stage ", i, " has layers [", s.first_layer(), ", ", s.last_layer(),
                       "), which do not continue [0, ", next, ") inside [0, ", n_layers, ")"));
    }
    // The address is for people reading the plan: calls go to the address
    // proven for the node id, never to this one.
    if (s.node_id().empty() || s.node_id().size() > 64) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan stage ", i, " needs a node id of 1 to 64 bytes"));
    }
    next = s.last_layer();
  }
  if (next != n_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan covers layers [0, ", next, ") of ", n_layers));
  }
  return absl::OkStatus();
}

v1::SamplingParams SamplingToProto(const SamplingParams& s) {
  v1::SamplingParams p;
  p.set_temperature(s.temperature);
  p.set_top_k(s.top_k);
  p.set_top_p(s.top_p);
  p.set_min_p(s.min_p);
  p.set_presence_penalty(s.presence_penalty);
  p.set_frequency_penalty(s.frequency_penalty);
  p.set_seed(s.seed);
  return p;
}

SamplingParams SamplingFromProto(const v1::SamplingParams& p) {
  SamplingParams s;
  s.temperature = p.temperature();
  s.top_k = p.top_k();
  s.top_p = p.top_p() == 0 ? 1.0f : p.top_p();  // proto3's default 0 means "not set": off
  s.min_p = p.min_p();
  s.presence_penalty = p.presence_penalty();
  s.frequency_penalty = p.frequency_penalty();
  s.seed = p.seed();
  return s;
}

TokenLogprobs LogprobsFromProto(const v1::TokenLogprobs& p) {
  TokenLogprobs out;
  out.chosen = {p.chosen().token(), p.chosen().logprob()};
  const int n = std::min(p.top_size(), kMaxTopLogprobs);
  out.top.reserve(n);
  for (int i = 0; i < n; ++i) out.top.push_back({p.top(i).token(), p.top(i).logprob()});
  return out;
}

v1::TokenLogprobs LogprobsToProto(const TokenLogprobs& logprobs) {
  v1::TokenLogprobs p;
  p.mutable_chosen()->set_token(logprobs.chosen.token);
  p.mutable_chosen()->set_logprob(logprobs.chosen.logprob);
  for (const TokenLogprob& t : logprobs.top) {
    v1::TokenLogprob* e = p.add_top();
    e->set_token(t.token);
    e->set_logprob(t.logprob);
  }
  return p;
}

v1::Tensor EncodeHidden(const std::vector<float>& values, uint64_t n_tokens, uint64_t n_embd,
                        v1::DType dtype) {
  v1::Tensor t;
  t.add_shape(n_tokens);
  t.add_shape(n_embd);
  if (dtype == v1::DTYPE_F16) {
    t.set_dtype(v1::DTYPE_F16);
    std::string bytes(values.size() * 2, '\0');
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t h = Fp32ToFp16(values[i]);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
    t.set_data(std::move(bytes));
  } else {
    t.set_dtype(v1::DTYPE_F32);
    t.set_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
  }
  return t;
}

absl::StatusOr<std::vector<float>> DecodeHidden(const v1::Tensor& t, uint64_t n_tokens,
                                                uint64_t n_embd) {
  if (t.shape_size() != 2 || t.shape(0) != n_tokens || t.shape(1) != n_embd) {
    std::string shape;
    for (uint64_t d : t.shape()) absl::StrAppend(&shape, shape.empty() ? "" : ", ", d);
    return absl::InvalidArgumentError(absl::StrCat("hidden states have shape [", shape,
                                                   "], expected [", n_tokens, ", ", n_embd, "]"));
  }
  const uint64_t n = n_tokens * n_embd;
  std::vector<float> out(n);
  switch (t.dtype()) {
    case v1::DTYPE_F32:
      if (t.data().size() != n * 4) break;
      std::memcpy(out.data(), t.data().data(), n * 4);
      return out;
    case v1::DTYPE_F16:
      if (t.data().size() != n * 2) break;
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, t.data().data() + i * 2, 2);
        out[i] = Fp16ToFp32(h);
      }
      return out;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("hidden states have unknown dtype ", static_cast<int>(t.dtype())));
  }
  return absl::InvalidArgumentError(absl::StrCat("hidden states hold ", t.data().size(),
                                                 " bytes, not ", n, " values of their dtype"));
}

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace ringlm
