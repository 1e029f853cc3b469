// What a batch may hold: steps of distinct sessions of one layer range, in
// arrival order, within the token and step bounds; a session's steps never
// overtake each other.
#include "daemon/stage/step_queue.h"

#include "gtest/gtest.h"

namespace ringlm {
namespace {

v1::StageStepRequest Step(const std::string& request, const std::string& session, int tokens,
                          uint32_t first_layer = 0, const std::string& fork_from = "") {
  v1::StageStepRequest r;
  r.set_request_id(request);
  r.set_session_id(session);
  r.set_origin("o");
  r.set_fork_from(fork_from);
  v1::PlanStage* s = r.mutable_plan()->add_stages();
  s->set_node_id("b");
  s->set_first_layer(first_layer);
  s->set_last_layer(first_layer + 2);
  for (int i = 0; i < tokens; ++i) r.add_tokens(1);
  return r;
}

std::vector<std::string> Ids(const std::vector<v1::StageStepRequest>& batch) {
  std::vector<std::string> ids;
  for (const auto& s : batch) ids.push_back(s.request_id());
  return ids;
}

TEST(StepQueueTest, BatchesOtherSessionsInArrivalOrderWithinTheBounds) {
  StepQueue q(100, 1 << 20);
  for (const auto& [id, session, n] : std::vector<std::tuple<std::string, std::string, int>>{
           {"a", "s1", 1}, {"b", "s2", 1}, {"c", "s1", 1}, {"d", "s3", 500}, {"e", "s4", 1}}) {
    ASSERT_TRUE(q.Push(Step(id, session, n)));
  }
  // "c" waits behind "a" (same session); "d" is over the token bound.
  EXPECT_EQ(Ids(q.PopBatch({.max_tokens = 100, .max_steps = 8})),
            (std::vector<std::string>{"a", "b", "e"}));
  EXPECT_EQ(Ids(q.PopBatch({.max_tokens = 100, .max_steps = 8})), (std::vector<std::string>{"c"}));
  // Over the bound alone: the oldest step always goes, by itself.
  EXPECT_EQ(Ids(q.PopBatch({.max_tokens = 100, .max_steps = 8})), (std::vector<std::string>{"d"}));
  EXPECT_EQ(q.pending(), 0u);
  EXPECT_EQ(q.pending_bytes(), 0u);
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(q.Push(Step("r" + std::to_string(i), "x" + std::to_string(i), 1)));
  EXPECT_EQ(q.PopBatch({.max_tokens = 100, .max_steps = 2}).size(), 2u);
}

TEST(StepQueueTest, OtherLayerRangesAndForksOfBatchedSessionsWait) {
  StepQueue q(100, 1 << 20);
  ASSERT_TRUE(q.Push(Step("a", "s1", 1)));
  ASSERT_TRUE(q.Push(Step("b", "s2", 1, /*first_layer=*/2)));  // the previous plan's range
  ASSERT_TRUE(q.Push(Step("c", "s3", 1, 0, /*fork_from=*/"s1")));
  ASSERT_TRUE(q.Push(Step("d", "s1", 1)));  // behind "a", and "c" reads s1 before it
  ASSERT_TRUE(q.Push(Step("e", "s5", 1)));
  EXPECT_EQ(Ids(q.PopBatch({})), (std::vector<std::string>{"a", "e"}));
  EXPECT_EQ(Ids(q.PopBatch({})), (std::vector<std::string>{"b"}));
  EXPECT_EQ(Ids(q.PopBatch({})), (std::vector<std::string>{"c"}));
  EXPECT_EQ(Ids(q.PopBatch({})), (std::vector<std::string>{"d"}));
}

TEST(StepQueueTest, EachTakenStepReportsItsWait) {
  MetricsRegistry registry;
  absl::StatusOr<Histogram*> wait =
      registry.AddHistogram("wait", "w", ExponentialBuckets(1e-6, 2, 8));
  ASSERT_TRUE(wait.ok());
  StepQueue q(100, 1 << 20, *wait);
  ASSERT_TRUE(q.Push(Step("a", "s1", 1)));
  ASSERT_TRUE(q.Push(Step("b", "s2", 1)));
  ASSERT_TRUE(q.Push(Step("c", "s1", 1)));
  EXPECT_EQ(q.PopBatch({}).size(), 2u);
  EXPECT_EQ((*wait)->Count(), 2u);  // "c" still waits
  EXPECT_GE((*wait)->Sum(), 0.0);
}

TEST(StepQueueTest, BoundedByCountAndBytesAndStopWakesTheWorker) {
  StepQueue q(2, 1 << 20);
  EXPECT_TRUE(q.Push(Step("a", "s1", 1)));
  EXPECT_TRUE(q.Push(Step("b", "s2", 1)));
  EXPECT_FALSE(q.Push(Step("c", "s3", 1)));
  StepQueue small(100, 16);
  EXPECT_FALSE(small.Push(Step("a", "s1", 1)));
  std::thread worker([&] { EXPECT_TRUE(small.PopBatch({}).empty()); });
  small.Stop();
  worker.join();
  EXPECT_FALSE(small.Push(Step("a", "s1", 1)));
}

}  // namespace
}  // namespace ringlm
