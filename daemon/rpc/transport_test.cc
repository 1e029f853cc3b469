// MemberTransport: calls to this node go to its own stage and origin as
// Caller::Self, calls to a non-member fail before anything is dialled, and
// calls to a member go over gRPC (a real server on loopback) to the address
// the resolver proves for it, with a deadline.
#include "daemon/rpc/transport.h"

#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "base/status_macros.h"
#include "daemon/rpc/peer_client.h"
#include "daemon/rpc/test_grpc_server.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ringlm {
namespace {

using ::testing::HasSubstr;

constexpr char kSelf[] = "self";

// This node's stage: records every call and answers with `answer`.
class FakeLocalStage : public LocalStage {
 public:
  struct Call {
    std::string kind;  // "enqueue", "cancel", "rollback", "drop" or "adopt"
    std::string id;    // request id (enqueue, cancel) or session id (drop, adopt)
    Caller caller;
  };

  absl::Status Enqueue(v1::StageStepRequest request, const Caller& caller) override {
    return Record("enqueue", request.request_id(), caller);
  }
  absl::Status Cancel(const std::string& request_id, const Caller& caller) override {
    return Record("cancel", request_id, caller);
  }
  absl::Status Rollback(const v1::RollbackRequest& request, const Caller& caller) override {
    return Record("rollback", request.request_id(), caller);
  }
  absl::StatusOr<bool> DropSession(const std::string& session_id, const Caller& caller) override {
    RINGLM_RETURN_IF_ERROR(Record("drop", session_id, caller));
    return true;
  }
  // Adopts the longest offered length.
  absl::StatusOr<uint32_t> AdoptPrefix(const v1::AdoptPrefixRequest& request,
                                       const Caller& caller) override {
    RINGLM_RETURN_IF_ERROR(Record("adopt", request.session_id(), caller));
    return request.lengths(request.lengths_size() - 1);
  }

  std::vector<Call> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  void set_answer(absl::Status s) {
    absl::MutexLock lock(&mu_);
    answer_ = std::move(s);
  }

 private:
  absl::Status Record(std::string kind, std::string id, const Caller& caller) {
    absl::MutexLock lock(&mu_);
    calls_.push_back({std::move(kind), std::move(id), caller});
    return answer_;
  }

  mutable absl::Mutex mu_;
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
  absl::Status answer_ ABSL_GUARDED_BY(mu_);
};

// This node's origin: records deliveries and answers `stop` (or `error`).
class FakeLocalOrigin : public LocalOrigin {
 public:
  absl::StatusOr<bool> Deliver(const v1::DeliverTokenRequest& delivery,
                               const std::string& caller) override {
    absl::MutexLock lock(&mu_);
    deliveries_.push_back({delivery, caller});
    if (!error_.ok()) return error_;
    return stop_;
  }

  std::vector<std::pair<v1::DeliverTokenRequest, std::string>> deliveries() const {
    absl::MutexLock lock(&mu_);
    return deliveries_;
  }
  void set_stop(bool stop) {
    absl::MutexLock lock(&mu_);
    stop_ = stop;
  }
  void set_error(absl::Status s) {
    absl::MutexLock lock(&mu_);
    error_ = std::move(s);
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::pair<v1::DeliverTokenRequest, std::string>> deliveries_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

// Another node's RingNode service: records the ring calls it receives (and
// the node id the caller claims, as in --insecure mode), answers each with
// `answer`, and can hold StageStep calls open until Release.
class FakePeerService final : public v1::RingNode::CallbackService {
 public:
  struct Call {
    std::string kind;
    std::string id;
    std::string claimed_node;
  };

  ~FakePeerService() override { Release(); }

  grpc::ServerUnaryReactor* StageStep(grpc::CallbackServerContext* ctx,
                                      const v1::StageStepRequest* request,
                                      v1::StageStepReply* /*reply*/) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    absl::MutexLock lock(&mu_);
    calls_.push_back({"step", request->request_id(), Claimed(*ctx)});
    last_step_ = *request;
    if (hold_steps_) {
      held_.push_back(reactor);
    } else {
      reactor->Finish(answer_);
    }
    return reactor;
  }
  grpc::ServerUnaryReactor* DeliverToken(grpc::CallbackServerContext* ctx,
                                         const v1::DeliverTokenRequest* request,
                                         v1::DeliverTokenReply* reply) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back({"deliver", request->request_id(), Claimed(*ctx)});
    reply->set_cancel(cancel_deliveries_);
    return Done(ctx);
  }
  grpc::ServerUnaryReactor* Cancel(grpc::CallbackServerContext* ctx,
                                   const v1::CancelRequest* request,
                                   v1::CancelReply* /*reply*/) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back({"cancel", request->request_id(), Claimed(*ctx)});
    return Done(ctx);
  }
  grpc::ServerUnaryReactor* Rollback(grpc::CallbackServerContext* ctx,
                                     const v1::RollbackRequest* request,
                                     v1::RollbackReply* /*reply*/) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back({"rollback", request->request_id(), Claimed(*ctx)});
    return Done(ctx);
  }
  grpc::ServerUnaryReactor* DropSession(grpc::CallbackServerContext* ctx,
                                        const v1::DropSessionRequest* request,
                                        v1::DropSessionReply* /*reply*/) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back({"drop", request->session_id(), Claimed(*ctx)});
    return Done(ctx);
  }
  // Adopts the shortest offered length.
  grpc::ServerUnaryReactor* AdoptPrefix(grpc::CallbackServerContext* ctx,
                                        const v1::AdoptPrefixRequest* request,
                                        v1::AdoptPrefixReply* reply) override {
    absl::MutexLock lock(&mu_);
    calls_.push_back({"adopt", request->session_id(), Claimed(*ctx)});
    reply->set_adopted(request->lengths(0));
    return Done(ctx);
  }

  std::vector<Call> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  v1::StageStepRequest last_step() const {
    absl::MutexLock lock(&mu_);
    return last_step_;
  }
  void set_answer(grpc::Status s) {
    absl::MutexLock lock(&mu_);
    answer_ = std::move(s);
  }
  void set_cancel_deliveries(bool cancel) {
    absl::MutexLock lock(&mu_);
    cancel_deliveries_ = cancel;
  }
  void set_hold_steps(bool hold) {
    absl::MutexLock lock(&mu_);
    hold_steps_ = hold;
  }
  // Waits until `n` StageStep calls are held open; false after 30 s.
  bool AwaitHeld(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return held_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(30));
  }
  // Ends the held calls (their callers have gone by now, or get CANCELLED).
  void Release() {
    absl::MutexLock lock(&mu_);
    for (grpc::ServerUnaryReactor* r : held_) {
      r->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "released"));
    }
    held_.clear();
  }

 private:
  static std::string Claimed(const grpc::CallbackServerContext& ctx) {
    auto it = ctx.client_metadata().find(kClaimedNodeMetadata);
    if (it == ctx.client_metadata().end()) return "";
    return std::string(it->second.data(), it->second.size());
  }
  grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(answer_);
    return reactor;
  }

  mutable absl::Mutex mu_;
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
  v1::StageStepRequest last_step_ ABSL_GUARDED_BY(mu_);
  grpc::Status answer_ ABSL_GUARDED_BY(mu_) = grpc::Status::OK;
  bool cancel_deliveries_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_steps_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<grpc::ServerUnaryReactor*> held_ ABSL_GUARDED_BY(mu_);
};

v1::StageStepRequest Step(const std::string& request_id) {
  v1::StageStepRequest r;
  r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  r.set_request_id(request_id);
  r.set_session_id("origin/s1");
  r.set_position(12);
  r.add_tokens(5);
  r.add_tokens(6);
  return r;
}

v1::DeliverTokenRequest Delivery(const std::string& request_id, int32_t token) {
  v1::DeliverTokenRequest r;
  r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  r.set_request_id(request_id);
  r.set_token(token);
  return r;
}

// An offer of the prefixes of 16 and 32 tokens for `session_id`.
v1::AdoptPrefixRequest Offer(const std::string& session_id) {
  v1::AdoptPrefixRequest r;
  r.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  r.set_session_id(session_id);
  for (uint32_t n : {16, 32}) {
    r.add_lengths(n);
    r.add_digests(std::string(32, 'd'));
  }
  return r;
}

class MemberTransportTest : public ::testing::Test {
 protected:
  MemberTransportTest() {
    RpcOptions options;
    // Only the hung-peer case waits this long, and only the deadline ends it.
    options.step_timeout = std::chrono::milliseconds(500);
    client_ = std::make_unique<PeerClient>(options, std::nullopt, kSelf);
    transport_ = std::make_unique<MemberTransport>(
        kSelf, client_.get(), [this](const std::string& id) -> std::optional<std::string> {
          absl::MutexLock lock(&mu_);
          resolved_.push_back(id);
          auto it = members_.find(id);
          if (it == members_.end()) return std::nullopt;
          return it->second;
        });
    transport_->Attach(&stage_, &origin_);
  }
  ~MemberTransportTest() override {
    peer_.Release();
    server_.Shutdown();
  }

  void AddMember(const std::string& id, const std::string& address) {
    absl::MutexLock lock(&mu_);
    members_[id] = address;
  }
  std::vector<std::string> resolved() const {
    absl::MutexLock lock(&mu_);
    return resolved_;
  }

  FakeLocalStage stage_;
  FakeLocalOrigin origin_;
  FakePeerService peer_;
  testing::TestGrpcServer server_{&peer_};
  std::unique_ptr<PeerClient> client_;
  std::unique_ptr<MemberTransport> transport_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> members_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> resolved_ ABSL_GUARDED_BY(mu_);
};

void ExpectSelf(const Caller& caller) {
  EXPECT_EQ(caller.role, Caller::Role::kNode);
  EXPECT_EQ(caller.node_id, kSelf);
  EXPECT_TRUE(caller.proven);
}

TEST_F(MemberTransportTest, CallsToThisNodeGoToItsOwnStageAsSelf) {
  ASSERT_TRUE(transport_->StageStep(kSelf, Step("r1#0")).ok());
  ASSERT_TRUE(transport_->Cancel(kSelf, "r2#0").ok());
  ASSERT_TRUE(transport_->DropSession(kSelf, "origin/s9").ok());
  EXPECT_EQ(*transport_->AdoptPrefix(kSelf, Offer("origin/s8")), 32u);
  v1::RollbackRequest rollback;
  rollback.set_request_id("r3#0");
  ASSERT_TRUE(transport_->Rollback(kSelf, rollback).ok());

  const std::vector<FakeLocalStage::Call> calls = stage_.calls();
  ASSERT_EQ(calls.size(), 5u);
  EXPECT_EQ(calls[4].kind, "rollback");
  EXPECT_EQ(calls[4].id, "r3#0");
  EXPECT_EQ(calls[3].kind, "adopt");
  EXPECT_EQ(calls[3].id, "origin/s8");
  EXPECT_EQ(calls[0].kind, "enqueue");
  EXPECT_EQ(calls[0].id, "r1#0");
  EXPECT_EQ(calls[1].kind, "cancel");
  EXPECT_EQ(calls[1].id, "r2#0");
  EXPECT_EQ(calls[2].kind, "drop");
  EXPECT_EQ(calls[2].id, "origin/s9");
  for (const FakeLocalStage::Call& c : calls) ExpectSelf(c.caller);
  // Nothing was resolved, dialled or sent.
  EXPECT_TRUE(resolved().empty());
  EXPECT_EQ(client_->channels(), 0u);
  EXPECT_TRUE(peer_.calls().empty());
}

TEST_F(MemberTransportTest, TheLocalStagesRefusalComesBackAsItIs) {
  stage_.set_answer(absl::ResourceExhaustedError("queue full"));
  absl::Status s = transport_->StageStep(kSelf, Step("r1#0"));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "queue full");
  stage_.set_answer(absl::PermissionDeniedError("not yours"));
  EXPECT_EQ(transport_->Cancel(kSelf, "r1#0").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(transport_->DropSession(kSelf, "s").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(transport_->AdoptPrefix(kSelf, Offer("s")).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(MemberTransportTest, DeliveriesToThisNodeGoToItsOwnOrigin) {
  v1::DeliverTokenReply reply;
  ASSERT_TRUE(transport_->DeliverToken(kSelf, Delivery("r1#0", 42), &reply).ok());
  EXPECT_FALSE(reply.cancel());
  origin_.set_stop(true);
  ASSERT_TRUE(transport_->DeliverToken(kSelf, Delivery("r1#0", 43), &reply).ok());
  EXPECT_TRUE(reply.cancel());  // the origin no longer wants the request

  const auto deliveries = origin_.deliveries();
  ASSERT_EQ(deliveries.size(), 2u);
  EXPECT_EQ(deliveries[0].first.token(), 42);
  EXPECT_EQ(deliveries[1].first.token(), 43);
  EXPECT_EQ(deliveries[0].second, kSelf);
  EXPECT_EQ(deliveries[1].second, kSelf);

  origin_.set_error(absl::NotFoundError("no such request"));
  EXPECT_EQ(transport_->DeliverToken(kSelf, Delivery("r9#0", 1), &reply).code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(resolved().empty());
  EXPECT_EQ(client_->channels(), 0u);
  EXPECT_TRUE(stage_.calls().empty());
}

TEST_F(MemberTransportTest, ANodeThatIsNotAMemberGetsFailedPreconditionWithoutADial) {
  v1::DeliverTokenReply reply;
  const std::vector<absl::Status> results = {
      transport_->StageStep("stranger", Step("r1#0")),
      transport_->DeliverToken("stranger", Delivery("r1#0", 1), &reply),
      transport_->Cancel("stranger", "r1#0"),
      transport_->DropSession("stranger", "s"),
  };
  for (const absl::Status& s : results) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("stranger"));
  }
  EXPECT_EQ(resolved().size(), 4u);
  EXPECT_EQ(client_->channels(), 0u);  // no channel was ever made
  EXPECT_TRUE(peer_.calls().empty());
  EXPECT_TRUE(stage_.calls().empty());
  EXPECT_TRUE(origin_.deliveries().empty());

  const absl::StatusOr<std::string> where = transport_->Resolve("stranger");
  EXPECT_EQ(where.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(MemberTransportTest, CallsToAMemberGoOverGrpcToItsProvenAddress) {
  ASSERT_TRUE(server_.started());
  AddMember("b", server_.address());
  EXPECT_EQ(*transport_->Resolve("b"), server_.address());

  ASSERT_TRUE(transport_->StageStep("b", Step("r1#0")).ok());
  peer_.set_cancel_deliveries(true);
  v1::DeliverTokenReply reply;
  ASSERT_TRUE(transport_->DeliverToken("b", Delivery("r1#0", 7), &reply).ok());
  EXPECT_TRUE(reply.cancel());  // the remote origin's answer reaches the caller
  ASSERT_TRUE(transport_->Cancel("b", "r2#0").ok());
  ASSERT_TRUE(transport_->DropSession("b", "origin/s3").ok());
  EXPECT_EQ(*transport_->AdoptPrefix("b", Offer("origin/s4")), 16u);
  v1::RollbackRequest rollback;
  rollback.set_request_id("r5#0");
  ASSERT_TRUE(transport_->Rollback("b", rollback).ok());

  const std::vector<FakePeerService::Call> calls = peer_.calls();
  ASSERT_EQ(calls.size(), 6u);
  EXPECT_EQ(calls[5].kind, "rollback");
  EXPECT_EQ(calls[5].id, "r5#0");
  EXPECT_EQ(calls[4].kind, "adopt");
  EXPECT_EQ(calls[4].id, "origin/s4");
  EXPECT_EQ(calls[0].kind, "step");
  EXPECT_EQ(calls[0].id, "r1#0");
  EXPECT_EQ(calls[1].kind, "deliver");
  EXPECT_EQ(calls[2].kind, "cancel");
  EXPECT_EQ(calls[2].id, "r2#0");
  EXPECT_EQ(calls[3].kind, "drop");
  EXPECT_EQ(calls[3].id, "origin/s3");
  // Insecure mode: the caller names itself in metadata.
  for (const FakePeerService::Call& c : calls) EXPECT_EQ(c.claimed_node, kSelf);
  // The step arrived whole.
  const v1::StageStepRequest step = peer_.last_step();
  EXPECT_EQ(step.session_id(), "origin/s1");
  EXPECT_EQ(step.position(), 12u);
  ASSERT_EQ(step.tokens_size(), 2);
  EXPECT_EQ(step.tokens(1), 6);
  // Nothing went to this node's own stage or origin.
  EXPECT_TRUE(stage_.calls().empty());
  EXPECT_TRUE(origin_.deliveries().empty());
  EXPECT_EQ(client_->channels(), 1u);
}

TEST_F(MemberTransportTest, AMembersRefusalComesBackWithItsCodeAndAddress) {
  ASSERT_TRUE(server_.started());
  AddMember("b", server_.address());
  peer_.set_answer(grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "position 3, not 12"));
  const absl::Status s = transport_->StageStep("b", Step("r1#0"));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("position 3, not 12"));
  EXPECT_THAT(std::string(s.message()), HasSubstr(server_.address()));
  peer_.set_answer(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "not in the plan"));
  EXPECT_EQ(transport_->Cancel("b", "r1#0").code(), absl::StatusCode::kPermissionDenied);
}

TEST_F(MemberTransportTest, AnUnreachableMemberIsUnavailable) {
  // Port 1 on loopback: nothing listens, the connection is refused.
  AddMember("gone", "127.0.0.1:1");
  v1::DeliverTokenReply reply;
  const std::vector<absl::Status> results = {
      transport_->StageStep("gone", Step("r1#0")),
      transport_->DeliverToken("gone", Delivery("r1#0", 1), &reply),
      transport_->Cancel("gone", "r1#0"),
      transport_->DropSession("gone", "s"),
  };
  for (const absl::Status& s : results) {
    EXPECT_TRUE(absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("127.0.0.1:1"));
  }
  EXPECT_TRUE(stage_.calls().empty());
}

TEST_F(MemberTransportTest, AMemberThatNeverAnswersCostsItsDeadline) {
  ASSERT_TRUE(server_.started());
  AddMember("b", server_.address());
  peer_.set_hold_steps(true);
  // The server holds the call until the end of the test: only the step
  // deadline (500 ms here) can end it.
  const absl::Status s = transport_->StageStep("b", Step("r1#0"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
}

TEST_F(MemberTransportTest, CallsInFlightToAMemberEndWhenItIsDropped) {
  ASSERT_TRUE(server_.started());
  AddMember("b", server_.address());
  peer_.set_hold_steps(true);
  RpcOptions patient;
  patient.step_timeout = std::chrono::seconds(60);
  PeerClient client(patient, std::nullopt, kSelf);
  MemberTransport transport(kSelf, &client, [this](const std::string&) {
    return std::optional<std::string>(server_.address());
  });
  transport.Attach(&stage_, &origin_);
  absl::Status result;
  // Joined when it goes, also when an assertion ends the test early.
  std::jthread caller([&] { result = transport.StageStep("b", Step("r1#0")); });
  ASSERT_TRUE(peer_.AwaitHeld(1));
  client.CancelCallsTo(server_.address());  // what ClusterView does for a lost member
  caller.join();
  EXPECT_EQ(result.code(), absl::StatusCode::kCancelled) << result;
}

}  // namespace
}  // namespace ringlm
