// The request parts table: what a step that omits its parts gets back, who
// may use kept parts, and the bound in bytes.
#include "daemon/stage/request_parts.h"

#include <string>

#include "gtest/gtest.h"

namespace ringlm {
namespace {

// A first step of request `id` from `origin`, carrying its parts.
v1::StageStepRequest FirstStep(const std::string& id, const std::string& origin,
                               size_t constraint_bytes = 0) {
  v1::StageStepRequest step;
  step.set_request_id(id);
  step.set_origin(origin);
  v1::PlanStage* stage = step.mutable_plan()->add_stages();
  stage->set_node_id("b");
  stage->set_last_layer(2);
  step.mutable_sampling()->set_temperature(0.5f);
  step.mutable_limits()->set_max_tokens(7);
  step.mutable_logprobs()->set_top(3);
  step.set_constraint(std::string(constraint_bytes, 'x'));
  step.set_wire_dtype(v1::DTYPE_F16);
  step.add_tokens(5);
  return step;
}

// A later step of the same request, omitting the parts.
v1::StageStepRequest LaterStep(const std::string& id, const std::string& origin) {
  v1::StageStepRequest step;
  step.set_request_id(id);
  step.set_origin(origin);
  step.set_parts_omitted(true);
  step.set_position(1);
  step.add_tokens(9);
  return step;
}

TEST(RequestPartsTest, HasPartsSeesEachField) {
  v1::StageStepRequest step;
  EXPECT_FALSE(HasParts(step));
  step.set_position(3);
  step.add_tokens(1);
  EXPECT_FALSE(HasParts(step));
  for (int field = 0; field < 6; ++field) {
    v1::StageStepRequest s;
    switch (field) {
      case 0:
        s.mutable_plan();
        break;
      case 1:
        s.mutable_sampling();
        break;
      case 2:
        s.mutable_limits();
        break;
      case 3:
        s.mutable_logprobs();
        break;
      case 4:
        s.set_constraint("{}");
        break;
      case 5:
        s.set_wire_dtype(v1::DTYPE_F32);
        break;
    }
    EXPECT_TRUE(HasParts(s)) << "field " << field;
  }
}

TEST(RequestPartsTest, ALaterStepGetsTheFirstStepsPartsAndKeepsItsOwnFields) {
  RequestPartsTable table(1 << 20);
  const v1::StageStepRequest first = FirstStep("r1", "o", 100);
  ASSERT_TRUE(table.Keep(first).ok());
  v1::StageStepRequest later = LaterStep("r1", "o");
  ASSERT_TRUE(table.Fill(later).ok());
  EXPECT_EQ(later.plan().SerializeAsString(), first.plan().SerializeAsString());
  EXPECT_EQ(later.sampling().temperature(), 0.5f);
  EXPECT_EQ(later.limits().max_tokens(), 7);
  EXPECT_EQ(later.logprobs().top(), 3u);
  EXPECT_EQ(later.constraint(), first.constraint());
  EXPECT_EQ(later.wire_dtype(), v1::DTYPE_F16);
  EXPECT_EQ(later.position(), 1u);
  ASSERT_EQ(later.tokens_size(), 1);
  EXPECT_EQ(later.tokens(0), 9);
  EXPECT_TRUE(later.parts_omitted());
}

TEST(RequestPartsTest, RefusesUnknownRequestsOtherOriginsAndStepsThatCarryPartsAnyway) {
  RequestPartsTable table(1 << 20);
  v1::StageStepRequest unknown = LaterStep("r1", "o");
  EXPECT_EQ(table.Fill(unknown).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(table.Keep(FirstStep("r1", "o")).ok());
  v1::StageStepRequest other = LaterStep("r1", "x");
  EXPECT_EQ(table.Fill(other).code(), absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(other.has_plan());
  v1::StageStepRequest both = LaterStep("r1", "o");
  both.set_constraint("{}");
  EXPECT_EQ(table.Fill(both).code(), absl::StatusCode::kInvalidArgument);
  table.Drop("r1");
  v1::StageStepRequest dropped = LaterStep("r1", "o");
  EXPECT_EQ(table.Fill(dropped).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.bytes(), 0u);
}

TEST(RequestPartsTest, KeepsAtMostItsBoundDroppingTheLeastRecentlyUsed) {
  // Room for about three entries of 10 KiB constraints.
  RequestPartsTable table(32 << 10);
  for (const char* id : {"r1", "r2", "r3"}) ASSERT_TRUE(table.Keep(FirstStep(id, "o", 10000)).ok());
  EXPECT_EQ(table.size(), 3u);
  v1::StageStepRequest use = LaterStep("r1", "o");
  ASSERT_TRUE(table.Fill(use).ok());  // r1 is now the most recent; r2 the least
  ASSERT_TRUE(table.Keep(FirstStep("r4", "o", 10000)).ok());
  EXPECT_LE(table.bytes(), uint64_t{32} << 10);
  for (const char* id : {"r1", "r3", "r4"}) {
    v1::StageStepRequest s = LaterStep(id, "o");
    EXPECT_TRUE(table.Fill(s).ok()) << id;
  }
  v1::StageStepRequest gone = LaterStep("r2", "o");
  EXPECT_EQ(table.Fill(gone).code(), absl::StatusCode::kFailedPrecondition);
  // Parts larger than the whole bound are refused, and evict nothing.
  EXPECT_EQ(table.Keep(FirstStep("big", "o", 40000)).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(table.size(), 3u);
}

TEST(RequestPartsTest, KeepingAgainReplacesAndCountsOnce) {
  RequestPartsTable table(1 << 20);
  ASSERT_TRUE(table.Keep(FirstStep("r1", "o", 1000)).ok());
  const uint64_t once = table.bytes();
  ASSERT_TRUE(table.Keep(FirstStep("r1", "o", 1000)).ok());
  EXPECT_EQ(table.bytes(), once);
  EXPECT_EQ(table.size(), 1u);
}

}  // namespace
}  // namespace ringlm
