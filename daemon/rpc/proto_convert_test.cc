// The conversions between wire messages and library types: every one round
// trips, and the checks on untrusted wire values refuse what is malformed
// with InvalidArgument.
#include "daemon/rpc/proto_convert.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/rpc/peer_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using ::testing::HasSubstr;

constexpr char kFingerprint[] = "model-fp";

TEST(ProtoConvertTest, CapabilitiesRoundTrip) {
  DeviceCapabilities caps;
  caps.total_memory_bytes = 64ull << 30;
  caps.usable_memory_bytes = (48ull << 30) + 7;
  caps.matmul_gflops = 123.25;
  caps.cpu_model = "AMD Ryzen 9 5950X 16-Core Processor";
  caps.threads = 31;
  caps.read_gbps = 38.5;
  caps.placement = Placement::kSpeed;
  const v1::Capabilities wire = CapabilitiesToProto(caps);
  EXPECT_EQ(wire.total_memory_bytes(), caps.total_memory_bytes);
  EXPECT_EQ(wire.usable_memory_bytes(), caps.usable_memory_bytes);
  EXPECT_EQ(wire.threads(), 31u);
  EXPECT_EQ(CapabilitiesFromProto(wire), caps);
  // Through the bytes of the wire, too.
  v1::Capabilities parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire.SerializeAsString()));
  EXPECT_EQ(CapabilitiesFromProto(parsed), caps);
}

TEST(ProtoConvertTest, CapabilitiesFromProtoTakesNonsenseSpeedFiguresAsUnknown) {
  v1::Capabilities wire;
  wire.set_read_gbps(std::nan(""));
  wire.set_placement(static_cast<v1::Placement>(7));  // a value this build does not know
  DeviceCapabilities caps = CapabilitiesFromProto(wire);
  EXPECT_EQ(caps.read_gbps, 0.0);
  EXPECT_EQ(caps.placement, Placement::kMemory);
  wire.set_read_gbps(-3);
  EXPECT_EQ(CapabilitiesFromProto(wire).read_gbps, 0.0);
}

TEST(ProtoConvertTest, CapabilitiesFromProtoCutsAnOverlongCpuModel) {
  v1::Capabilities wire;
  wire.set_cpu_model(std::string(300, 'x') + "tail");
  wire.set_threads(4);
  const DeviceCapabilities caps = CapabilitiesFromProto(wire);
  EXPECT_EQ(caps.cpu_model, std::string(256, 'x'));
  EXPECT_EQ(caps.threads, 4u);
}

Partition ThreeStages() {
  Partition p;
  p.stages = {
      {"a", "10.0.0.1:47801", 0, 3}, {"b", "10.0.0.2:47801", 3, 5}, {"c", "[fe80::1]:47801", 5, 8}};
  p.idle_node_ids = {"d"};
  return p;
}

TEST(ProtoConvertTest, PlanToProtoKeepsEveryStageAndValidates) {
  const Partition partition = ThreeStages();
  const v1::Plan plan = PlanToProto(partition, 42, kFingerprint, 8);
  EXPECT_EQ(plan.epoch(), 42u);
  EXPECT_EQ(plan.model_fingerprint(), kFingerprint);
  EXPECT_EQ(plan.n_layers(), 8u);
  ASSERT_EQ(plan.stages_size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(plan.stages(i).node_id(), partition.stages[i].node_id);
    EXPECT_EQ(plan.stages(i).address(), partition.stages[i].address);
    EXPECT_EQ(plan.stages(i).first_layer(), partition.stages[i].first_layer);
    EXPECT_EQ(plan.stages(i).last_layer(), partition.stages[i].last_layer);
  }
  EXPECT_TRUE(ValidatePlan(plan, 8, kFingerprint).ok());
  EXPECT_EQ(DescribePlan(plan), "a[0,3) b[3,5) c[5,8)");
  EXPECT_EQ(DescribePlan(v1::Plan()), "");
}

TEST(ProtoConvertTest, ValidatePlanAcceptsOneStageAndANodeIdOf64Bytes) {
  Partition one;
  one.stages = {{std::string(64, 'n'), "", 0, 8}};
  EXPECT_TRUE(ValidatePlan(PlanToProto(one, 1, kFingerprint, 8), 8, kFingerprint).ok());
  Partition per_layer;
  for (uint32_t l = 0; l < 4; ++l) per_layer.stages.push_back({absl::StrCat("n", l), "", l, l + 1});
  EXPECT_TRUE(ValidatePlan(PlanToProto(per_layer, 1, kFingerprint, 4), 4, kFingerprint).ok());
}

// Each case breaks a valid three-stage plan of 8 layers in one way.
TEST(ProtoConvertTest, ValidatePlanRefusesMalformedPlans) {
  struct Case {
    std::string name;
    std::function<void(v1::Plan*)> damage;
    std::string message;  // a part of the error
  };
  const std::vector<Case> cases = {
      {"another model", [](v1::Plan* p) { p->set_model_fingerprint("other"); }, "other"},
      {"no stages", [](v1::Plan* p) { p->clear_stages(); }, "no stages"},
      {"first stage after 0", [](v1::Plan* p) { p->mutable_stages(0)->set_first_layer(1); },
       "stage 0"},
      {"a gap", [](v1::Plan* p) { p->mutable_stages(1)->set_first_layer(4); }, "stage 1"},
      {"an overlap", [](v1::Plan* p) { p->mutable_stages(2)->set_first_layer(4); }, "stage 2"},
      {"an empty stage",
       [](v1::Plan* p) {
         p->mutable_stages(1)->set_last_layer(3);
         p->mutable_stages(2)->set_first_layer(3);
       },
       "stage 1"},
      {"a reversed stage",
       [](v1::Plan* p) {
         p->mutable_stages(1)->set_first_layer(3);
         p->mutable_stages(1)->set_last_layer(2);
       },
       "stage 1"},
      {"past the last layer", [](v1::Plan* p) { p->mutable_stages(2)->set_last_layer(9); },
       "stage 2"},
      {"short of the last layer", [](v1::Plan* p) { p->mutable_stages(2)->set_last_layer(7); },
       "covers layers [0, 7) of 8"},
      {"an empty node id", [](v1::Plan* p) { p->mutable_stages(1)->set_node_id(""); }, "node id"},
      {"a node id of 65 bytes",
       [](v1::Plan* p) { p->mutable_stages(0)->set_node_id(std::string(65, 'n')); }, "node id"},
      {"more stages than layers",
       [](v1::Plan* p) {
         // Nine stages for eight layers (the ninth repeats the last).
         for (int i = 0; i < 6; ++i) *p->add_stages() = p->stages(2);
       },
       "more stages"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    v1::Plan plan = PlanToProto(ThreeStages(), 1, kFingerprint, 8);
    ASSERT_TRUE(ValidatePlan(plan, 8, kFingerprint).ok());
    c.damage(&plan);
    const absl::Status s = ValidatePlan(plan, 8, kFingerprint);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
  }
  // A plan that is fine in itself, for a model with another layer count.
  EXPECT_EQ(ValidatePlan(PlanToProto(ThreeStages(), 1, kFingerprint, 8), 9, kFingerprint).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidatePlan(PlanToProto(ThreeStages(), 1, kFingerprint, 8), 7, kFingerprint).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ProtoConvertTest, SamplingParamsRoundTrip) {
  SamplingParams s;
  s.temperature = 0.7f;
  s.top_k = 40;
  s.top_p = 0.9f;
  s.min_p = 0.05f;
  s.presence_penalty = -1.5f;
  s.frequency_penalty = 0.25f;
  s.seed = 0xfeedfacecafebeefull;
  ASSERT_TRUE(s.Validate().ok());
  EXPECT_EQ(SamplingFromProto(SamplingToProto(s)), s);

  SamplingParams greedy;
  greedy.temperature = 0;
  EXPECT_EQ(SamplingFromProto(SamplingToProto(greedy)), greedy);
  EXPECT_EQ(SamplingFromProto(SamplingToProto(SamplingParams())), SamplingParams());
}

TEST(ProtoConvertTest, SamplingFieldsLeftAtZeroMeanOff) {
  const SamplingParams s = SamplingFromProto(v1::SamplingParams());
  EXPECT_EQ(s.temperature, 0.0f);  // greedy
  EXPECT_EQ(s.top_k, 0);
  EXPECT_EQ(s.top_p, 1.0f);  // proto3's 0 is "not set", not an empty nucleus
  EXPECT_EQ(s.min_p, 0.0f);
  EXPECT_EQ(s.presence_penalty, 0.0f);
  EXPECT_EQ(s.frequency_penalty, 0.0f);
  EXPECT_TRUE(s.Validate().ok()) << s.Validate();
}

TEST(ProtoConvertTest, LogprobsRoundTrip) {
  TokenLogprobs l;
  l.chosen = {17, -0.25f};
  l.top = {{17, -0.25f}, {3, -1.5f}, {400, -7.0f}};
  const v1::TokenLogprobs wire = LogprobsToProto(l);
  EXPECT_EQ(wire.chosen().token(), 17);
  ASSERT_EQ(wire.top_size(), 3);
  EXPECT_EQ(wire.top(2).token(), 400);
  EXPECT_EQ(LogprobsFromProto(wire), l);

  TokenLogprobs chosen_only;
  chosen_only.chosen = {5, -3.0f};
  EXPECT_EQ(LogprobsFromProto(LogprobsToProto(chosen_only)), chosen_only);
}

TEST(ProtoConvertTest, LogprobsFromProtoKeepsAtMostTheAllowedAlternatives) {
  v1::TokenLogprobs wire;
  wire.mutable_chosen()->set_token(1);
  for (int i = 0; i < kMaxTopLogprobs + 5; ++i) {
    v1::TokenLogprob* t = wire.add_top();
    t->set_token(i);
    t->set_logprob(-static_cast<float>(i));
  }
  const TokenLogprobs l = LogprobsFromProto(wire);
  ASSERT_EQ(l.top.size(), static_cast<size_t>(kMaxTopLogprobs));
  for (int i = 0; i < kMaxTopLogprobs; ++i) {
    EXPECT_EQ(l.top[i].token, i);  // the first ones, best first as sent
    EXPECT_EQ(l.top[i].logprob, -static_cast<float>(i));
  }
}

TEST(ProtoConvertTest, HiddenStatesInF32RoundTripBitForBit) {
  const std::vector<float> values = {0.0f,
                                     -0.0f,
                                     1.0f / 3.0f,
                                     -123456.789f,
                                     std::numeric_limits<float>::denorm_min(),
                                     std::numeric_limits<float>::max(),
                                     std::numeric_limits<float>::infinity(),
                                     7.0f};
  const v1::Tensor t = EncodeHidden(values, 2, 4, v1::DTYPE_F32);
  EXPECT_EQ(t.dtype(), v1::DTYPE_F32);
  ASSERT_EQ(t.shape_size(), 2);
  EXPECT_EQ(t.shape(0), 2u);
  EXPECT_EQ(t.shape(1), 4u);
  EXPECT_EQ(t.data().size(), values.size() * 4);
  absl::StatusOr<std::vector<float>> back = DecodeHidden(t, 2, 4);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), values.size());
  EXPECT_EQ(std::memcmp(back->data(), values.data(), values.size() * 4), 0);
}

TEST(ProtoConvertTest, HiddenStatesInF16KeepWhatAHalfCanHold) {
  // Exactly representable in binary16: they come back unchanged.
  const std::vector<float> exact = {0.0f, 1.0f, -2.0f, 0.5f, 1024.0f, -0.000244140625f};
  const v1::Tensor t = EncodeHidden(exact, 3, 2, v1::DTYPE_F16);
  EXPECT_EQ(t.dtype(), v1::DTYPE_F16);
  EXPECT_EQ(t.data().size(), exact.size() * 2);
  absl::StatusOr<std::vector<float>> back = DecodeHidden(t, 3, 2);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, exact);

  // Others are rounded to the nearest half, and overflow to infinity.
  const std::vector<float> rounded = {0.1f, -3.14159f, 70000.0f, -70000.0f};
  absl::StatusOr<std::vector<float>> r =
      DecodeHidden(EncodeHidden(rounded, 1, 4, v1::DTYPE_F16), 1, 4);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR((*r)[0], 0.1f, 0.1f / 1024);
  EXPECT_NE((*r)[0], 0.1f);
  EXPECT_NEAR((*r)[1], -3.14159f, 3.14159f / 1024);
  EXPECT_TRUE(std::isinf((*r)[2]) && (*r)[2] > 0);
  EXPECT_TRUE(std::isinf((*r)[3]) && (*r)[3] < 0);
}

TEST(ProtoConvertTest, DecodeHiddenRefusesAnotherShape) {
  const std::vector<float> values(12, 1.0f);
  const v1::Tensor good = EncodeHidden(values, 3, 4, v1::DTYPE_F32);
  ASSERT_TRUE(DecodeHidden(good, 3, 4).ok());
  // Asked for another shape than the one sent (same number of values).
  EXPECT_EQ(DecodeHidden(good, 4, 3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeHidden(good, 2, 6).status().code(), absl::StatusCode::kInvalidArgument);

  v1::Tensor rank1 = good;
  rank1.clear_shape();
  rank1.add_shape(12);
  EXPECT_EQ(DecodeHidden(rank1, 3, 4).status().code(), absl::StatusCode::kInvalidArgument);
  v1::Tensor rank3 = good;
  rank3.add_shape(1);
  const absl::Status s = DecodeHidden(rank3, 3, 4).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("[3, 4, 1]"));
  v1::Tensor none = good;
  none.clear_shape();
  EXPECT_EQ(DecodeHidden(none, 3, 4).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ProtoConvertTest, DecodeHiddenRefusesAByteCountThatDoesNotFitTheDtype) {
  const std::vector<float> values(8, 2.0f);
  for (v1::DType dtype : {v1::DTYPE_F32, v1::DTYPE_F16}) {
    SCOPED_TRACE(v1::DType_Name(dtype));
    const v1::Tensor good = EncodeHidden(values, 2, 4, dtype);
    ASSERT_TRUE(DecodeHidden(good, 2, 4).ok());
    v1::Tensor shorter = good;
    shorter.mutable_data()->pop_back();
    EXPECT_EQ(DecodeHidden(shorter, 2, 4).status().code(), absl::StatusCode::kInvalidArgument);
    v1::Tensor longer = good;
    longer.mutable_data()->push_back('\0');
    EXPECT_EQ(DecodeHidden(longer, 2, 4).status().code(), absl::StatusCode::kInvalidArgument);
    v1::Tensor empty = good;
    empty.clear_data();
    EXPECT_EQ(DecodeHidden(empty, 2, 4).status().code(), absl::StatusCode::kInvalidArgument);
  }
  // f32 bytes labelled f16, and the reverse: twice or half the bytes expected.
  v1::Tensor relabelled = EncodeHidden(values, 2, 4, v1::DTYPE_F32);
  relabelled.set_dtype(v1::DTYPE_F16);
  EXPECT_EQ(DecodeHidden(relabelled, 2, 4).status().code(), absl::StatusCode::kInvalidArgument);
  relabelled = EncodeHidden(values, 2, 4, v1::DTYPE_F16);
  relabelled.set_dtype(v1::DTYPE_F32);
  EXPECT_EQ(DecodeHidden(relabelled, 2, 4).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ProtoConvertTest, DecodeHiddenRefusesAnUnknownDtype) {
  v1::Tensor t = EncodeHidden(std::vector<float>(4, 1.0f), 1, 4, v1::DTYPE_F32);
  t.set_dtype(v1::DTYPE_UNSPECIFIED);
  absl::Status s = DecodeHidden(t, 1, 4).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("dtype"));
  // A value from a newer peer's enum, as proto3 keeps it.
  t.set_dtype(static_cast<v1::DType>(9));
  s = DecodeHidden(t, 1, 4).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("9"));
}

TEST(ProtoConvertTest, StatusCodesCrossTheGrpcEdgeBothWays) {
  EXPECT_TRUE(ToGrpc(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpc(grpc::Status::OK, "10.0.0.1:1").ok());
  const std::vector<std::pair<absl::Status, grpc::StatusCode>> cases = {
      {absl::InvalidArgumentError("bad"), grpc::StatusCode::INVALID_ARGUMENT},
      {absl::DataLossError("rot"), grpc::StatusCode::DATA_LOSS},
      {absl::UnavailableError("gone"), grpc::StatusCode::UNAVAILABLE},
      {absl::DeadlineExceededError("slow"), grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::ResourceExhaustedError("full"), grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::FailedPreconditionError("miss"), grpc::StatusCode::FAILED_PRECONDITION},
      {absl::PermissionDeniedError("no"), grpc::StatusCode::PERMISSION_DENIED},
      {absl::NotFoundError("none"), grpc::StatusCode::NOT_FOUND},
      {absl::OutOfRangeError("past"), grpc::StatusCode::OUT_OF_RANGE},
      {absl::CancelledError("stop"), grpc::StatusCode::CANCELLED},
      {absl::UnauthenticatedError("who"), grpc::StatusCode::UNAUTHENTICATED},
      {absl::InternalError("bug"), grpc::StatusCode::INTERNAL},
  };
  for (const auto& [status, code] : cases) {
    SCOPED_TRACE(status.ToString());
    const grpc::Status wire = ToGrpc(status);
    EXPECT_EQ(wire.error_code(), code);
    EXPECT_EQ(wire.error_message(), status.message());
    // And back, as a client sees it: the same code, naming the peer.
    const absl::Status back = FromGrpc(wire, "10.0.0.9:47801");
    EXPECT_EQ(back.code(), status.code());
    EXPECT_THAT(std::string(back.message()), HasSubstr("10.0.0.9:47801"));
    EXPECT_THAT(std::string(back.message()), HasSubstr(std::string(status.message())));
  }
}

}  // namespace
}  // namespace ringlm
