#include "daemon/stage/stage_runtime.h"

#include <algorithm>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "daemon/rpc/proto_convert.h"
#include "inference/token_digest.h"
#include "security/crypto.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

// The header of the request's next step, to stage `stage_index`: with the
// request's parts when that stage may not hold them yet, else without.
v1::StageStepRequest NextStep(const v1::StageStepRequest& from, uint32_t stage_index,
                              bool with_parts) {
  v1::StageStepRequest next;
  next.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  next.set_request_id(from.request_id());
  next.set_session_id(from.session_id());
  next.set_stage_index(stage_index);
  next.set_origin(from.origin());
  if (with_parts) {
    CopyParts(from, next);
  } else {
    next.set_parts_omitted(true);
  }
  return next;
}

constexpr char kCacheMissPayload[] = "ringlm.dev/cache-miss";

// A claimed prefix this stage does not hold. The reason stays in this
// node's debug log: the answer is the same whatever the stage holds, so a
// claim reveals nothing about other conversations.
absl::Status CacheMiss(const v1::StageStepRequest& request, absl::string_view why) {
  spdlog::debug("request {}: prefix cache miss: {}", request.request_id(), std::string(why));
  absl::Status s = absl::FailedPreconditionError("prefix cache miss");
  s.SetPayload(kCacheMissPayload, absl::Cord("1"));
  return s;
}

bool IsCacheMiss(const absl::Status& s) { return s.GetPayload(kCacheMissPayload).has_value(); }

StepLimits MakeLimits(const Model& model, const std::string& self_id, uint32_t max_step_tokens) {
  const ModelConfig& config = model.config();
  return StepLimits{.self_id = self_id,
                    .model_fingerprint = model.fingerprint(),
                    .n_layer = config.n_layer,
                    .n_embd = config.n_embd,
                    .n_vocab = config.n_vocab,
                    .context_size = model.context_size(),
                    .max_step_tokens = max_step_tokens};
}

// Packs a new range's weights for the kernels (Model::Pack) before they are
// shared, logging the copy at its start, half-way and end: on a large stage
// it is most of the reading of the weights from disk.
absl::Status PackWeights(const Model& model, LayerRange range, StageWeights& weights) {
  int last_half = -1;
  return model.Pack(weights, [&](uint64_t done, uint64_t total) {
    const int half = static_cast<int>(done * 2 / total);
    if (half == last_half) return;
    last_half = half;
    spdlog::info("packing layers [{}, {}) for the kernels: {}% of {:.1f} MiB", range.first,
                 range.last, half * 50, total / 1048576.0);
  });
}

}  // namespace

StageRuntime::StageRuntime(const Model& model, ThreadPool* pool, Transport* transport,
                           std::string self_id, MembershipCheck is_member, StageOptions options)
    : model_(model),
      pool_(pool),
      transport_(transport),
      self_id_(std::move(self_id)),
      is_member_(std::move(is_member)),
      options_(options),
      limits_(MakeLimits(model, self_id_, options.max_step_tokens)),
      sessions_(options.sessions),
      parts_(options.max_parts_bytes),
      sampler_(model.tokenizer(), model.context_size(), options.max_samplers, options.draft_model),
      sender_(RingSender::Limits{}),
      queue_(options.max_queued_steps, options.max_queued_bytes, options.queue_wait_seconds),
      worker_([this] { WorkerLoop(); }) {}

StageRuntime::~StageRuntime() { Stop(); }

void StageRuntime::Stop() {
  queue_.Stop();
  if (worker_.joinable()) worker_.join();
  sender_.Stop();
}

absl::Status StageRuntime::SetRange(std::optional<LayerRange> range, const Handover& handover) {
  auto make_bundle = [&](StageWeights weights) {
    auto bundle = std::make_shared<Bundle>();
    bundle->weights = std::make_unique<StageWeights>(std::move(weights));
    bundle->engine = std::make_unique<StageEngine>(model_.config(), *bundle->weights, pool_);
    return bundle;
  };
  std::shared_ptr<Bundle> bundle;
  if (range.has_value()) {
    RINGLM_ASSIGN_OR_RETURN(StageWeights weights, model_.LoadStage(*range));
    RINGLM_RETURN_IF_ERROR(PackWeights(model_, *range, weights));
    bundle = make_bundle(std::move(weights));
  }
  std::shared_ptr<const Bundle> left;
  {
    absl::MutexLock lock(&mu_);
    left = current_;
  }
  // The range before stays for requests on the old plan, read through the
  // file's mapping as it was loaded: its packed copies of layers not taken
  // go once the calls running on them end, not at the next change.
  std::shared_ptr<Bundle> previous;
  if (left != nullptr) {
    RINGLM_ASSIGN_OR_RETURN(StageWeights mapped, model_.LoadStage(left->weights->range()));
    previous = make_bundle(std::move(mapped));
  }
  std::vector<LayerRange> kept;
  {
    absl::MutexLock lock(&mu_);
    previous_ = previous;
    current_ = bundle;
    for (const auto& b : {current_, previous_}) {
      if (b != nullptr) kept.push_back(b->weights->range());
    }
  }
  // Sessions of the previous range stay, so requests on the old plan finish
  // on it; KV of any other range is of no use any more. A session is only
  // ever used with the very layers it holds (AcquireSession).
  sessions_.DropIdleIf([&](const KvCache& cache) {
    return std::none_of(kept.begin(), kept.end(),
                        [&](const LayerRange& r) { return cache.Holds(r.first, r.last); });
  });
  if (handover) {
    handover(bundle != nullptr ? bundle->weights.get() : nullptr,
             left != nullptr ? left->weights.get() : nullptr);
  }
  return absl::OkStatus();
}

std::optional<LayerRange> StageRuntime::range() const {
  absl::MutexLock lock(&mu_);
  if (current_ == nullptr) return std::nullopt;
  return current_->weights->range();
}

std::shared_ptr<const StageRuntime::Bundle> StageRuntime::BundleFor(uint32_t first,
                                                                    uint32_t last) const {
  absl::MutexLock lock(&mu_);
  for (const auto& b : {current_, previous_}) {
    if (b != nullptr && b->weights->range().first == first && b->weights->range().last == last) {
      return b;
    }
  }
  return nullptr;
}

absl::Status StageRuntime::Enqueue(v1::StageStepRequest request, const Caller& caller) {
  if (request.parts_omitted()) {
    absl::MutexLock lock(&mu_);
    auto it = requests_.find(request.request_id());
    if (it != requests_.end() && it->second.cancelled) return absl::OkStatus();  // a late step
    RINGLM_RETURN_IF_ERROR(parts_.Fill(request));
  }
  RINGLM_RETURN_IF_ERROR(ValidateStageStep(request, limits_));
  RINGLM_RETURN_IF_ERROR(Authorize(request, caller));
  // Well-formed and allowed; now, does this node hold the plan's layers?
  const v1::PlanStage& stage = request.plan().stages(request.stage_index());
  if (BundleFor(stage.first_layer(), stage.last_layer()) == nullptr) {
    std::optional<LayerRange> held = range();
    return absl::FailedPreconditionError(
        absl::StrCat("plan epoch ", request.plan().epoch(), " gives this node layers [",
                     stage.first_layer(), ", ", stage.last_layer(), ") but it holds ",
                     held ? absl::StrCat("[", held->first, ", ", held->last, ")") : "none"));
  }
  {
    absl::MutexLock lock(&mu_);
    RINGLM_RETURN_IF_ERROR(RecordRequestLocked(request.request_id(), request.origin(), false));
    if (!request.parts_omitted()) RINGLM_RETURN_IF_ERROR(parts_.Keep(request));
    RequestRecord& record = requests_.at(request.request_id());
    // A late step of a cancelled request, or of a voided branch: drop it quietly.
    if (record.cancelled || request.branch() < record.void_below) return absl::OkStatus();
    if (record.session_key.empty()) {  // a request id keeps its session and plan
      record.session_key = SessionKey(request.origin(), request.session_id());
      record.last_stage = request.plan().stages(request.plan().stages_size() - 1).node_id();
    }
    record.branch_seen = std::max(record.branch_seen, request.branch());
  }
  if (!queue_.Push(std::move(request))) {
    return absl::ResourceExhaustedError("the stage queue is full or stopping");
  }
  return absl::OkStatus();
}

absl::Status StageRuntime::Authorize(const v1::StageStepRequest& request,
                                     const Caller& caller) const {
  const auto& stages = request.plan().stages();
  for (const v1::PlanStage& s : stages) {
    if (!is_member_(s.node_id())) {
      return absl::PermissionDeniedError(
          absl::StrCat("the plan names node ", s.node_id(), ", which is not a proven member"));
    }
  }
  if (!is_member_(request.origin())) {
    return absl::PermissionDeniedError(
        absl::StrCat("the origin ", request.origin(), " is not a proven member"));
  }
  const int n = stages.size();
  const std::string& previous = stages[(request.stage_index() + n - 1) % n].node_id();
  if (!caller.is_node() || (caller.node_id != previous && caller.node_id != request.origin())) {
    return absl::PermissionDeniedError(
        absl::StrCat("node ", caller.node_id, " may not send stage ", request.stage_index(),
                     " a step: only the previous stage or the request's origin may"));
  }
  return absl::OkStatus();
}

absl::Status StageRuntime::RecordRequestLocked(const std::string& request_id,
                                               const std::string& origin, bool cancel) {
  const auto now = std::chrono::steady_clock::now();
  auto it = requests_.find(request_id);
  if (it == requests_.end()) {
    if (requests_.size() >= options_.max_requests) {
      for (auto i = requests_.begin(); i != requests_.end();) {
        i = now - i->second.last_seen > options_.cancel_memory ? requests_.erase(i) : std::next(i);
      }
      if (requests_.size() >= options_.max_requests) {
        return absl::ResourceExhaustedError("this stage tracks too many requests");
      }
    }
    RequestRecord record;
    record.origin = origin;
    record.last_seen = now;
    record.serial = next_serial_++;
    it = requests_.emplace(request_id, std::move(record)).first;
  } else if (it->second.origin != origin) {
    return absl::PermissionDeniedError(
        absl::StrCat("request ", request_id, " belongs to another origin"));
  }
  it->second.last_seen = now;
  if (cancel) it->second.cancelled = true;
  return absl::OkStatus();
}

absl::Status StageRuntime::Cancel(const std::string& request_id, const Caller& caller) {
  if (request_id.empty() || request_id.size() > kMaxWireIdBytes) {
    return absl::InvalidArgumentError("request_id must have 1 to 128 bytes");
  }
  if (!caller.is_node()) return absl::PermissionDeniedError("only an origin node may cancel");
  absl::MutexLock lock(&mu_);
  // An unknown id is recorded as the caller's: its steps, if any come,
  // must then be the caller's own.
  RINGLM_RETURN_IF_ERROR(RecordRequestLocked(request_id, caller.node_id, true));
  parts_.Drop(request_id);
  // Its sampler goes before the next batch (past the bound, LRU eviction
  // takes it eventually; its steps are skipped either way).
  if (to_forget_.size() < options_.max_requests) to_forget_.push_back(request_id);
  return absl::OkStatus();
}

absl::Status StageRuntime::Rollback(const v1::RollbackRequest& request, const Caller& caller) {
  if (request.request_id().empty() || request.request_id().size() > kMaxWireIdBytes) {
    return absl::InvalidArgumentError("request_id must have 1 to 128 bytes");
  }
  if (request.branch() == 0) {
    return absl::InvalidArgumentError("a rollback starts branch 1 or later");
  }
  if (!caller.is_node()) return absl::PermissionDeniedError("only a stage may roll back");
  absl::ReleasableMutexLock lock(&mu_);
  auto it = requests_.find(request.request_id());
  if (it == requests_.end() || it->second.session_key.empty()) return absl::OkStatus();
  RequestRecord& record = it->second;
  if (caller.node_id != record.last_stage) {
    return absl::PermissionDeniedError(absl::StrCat(
        "node ", caller.node_id, " is not the last stage of request ", request.request_id()));
  }
  if (request.branch() <= record.void_below) return absl::OkStatus();  // old news
  record.void_below = request.branch();
  // A step of the branch already here truncates the session itself.
  if (record.branch_seen >= request.branch()) return absl::OkStatus();
  Truncation t{request.request_id(), record.session_key, record.serial, request.branch(),
               request.positions()};
  if (to_truncate_.size() < options_.max_requests) to_truncate_.push_back(std::move(t));
  lock.Release();
  // Queued first, then applied here unless the worker is running a batch:
  // it applies the queue after it.
  if (batch_mu_.TryLock()) {
    ApplyTruncations();
    batch_mu_.Unlock();
  }
  return absl::OkStatus();
}

bool StageRuntime::TryTruncate(const Truncation& t) {
  absl::StatusOr<SessionStore::Lease> lease = sessions_.AcquireExisting(t.session_key);
  if (absl::IsUnavailable(lease.status())) return false;  // busy
  if (!lease.ok()) return true;                           // gone: nothing to drop
  {
    // Holding the lease, no step runs on the session: if none of the
    // branch has come yet, none has run.
    absl::MutexLock lock(&mu_);
    auto it = requests_.find(t.request_id);
    if (it == requests_.end() || it->second.branch_seen >= t.branch) return true;
  }
  KvCache& cache = lease->cache();
  // Only what this request wrote: the conversation's next request may
  // have run on the session since.
  if (cache.writer() == t.serial && cache.n_positions() > t.positions) cache.Truncate(t.positions);
  return true;
}

void StageRuntime::ApplyTruncations() {
  std::vector<Truncation> pending;
  {
    absl::MutexLock lock(&mu_);
    pending.swap(to_truncate_);
  }
  std::erase_if(pending, [this](const Truncation& t) { return TryTruncate(t); });
  if (pending.empty()) return;
  absl::MutexLock lock(&mu_);  // still busy (another lease): next time
  for (Truncation& t : pending) {
    if (to_truncate_.size() < options_.max_requests) to_truncate_.push_back(std::move(t));
  }
}

bool StageRuntime::IsDropped(const v1::StageStepRequest& request) const {
  {
    absl::MutexLock lock(&mu_);
    auto it = requests_.find(request.request_id());
    if (it != requests_.end() &&
        (it->second.cancelled || request.branch() < it->second.void_below)) {
      return true;
    }
  }
  return request.sample() && sampler_.IsVoid(request);
}

uint64_t StageRuntime::SerialOf(const std::string& request_id) const {
  absl::MutexLock lock(&mu_);
  auto it = requests_.find(request_id);
  return it == requests_.end() ? 0 : it->second.serial;
}

void StageRuntime::SendRollback(const v1::StageStepRequest& request,
                                const LastStageSampler::Rollback& r) {
  v1::RollbackRequest rollback;
  rollback.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  rollback.set_request_id(request.request_id());
  rollback.set_branch(r.branch);
  rollback.set_positions(r.positions);
  for (const v1::PlanStage& stage : request.plan().stages()) {
    const std::string& to = stage.node_id();
    if (to == self_id_) continue;
    // In the lane of the steps to that node: stage 0 gets it before the
    // next step.
    auto send = [this, to, rollback] {
      if (absl::Status s = transport_->Rollback(to, rollback); !s.ok() && Allow("rollback")) {
        spdlog::warn("request {}: cannot roll back stage on {}: {}", rollback.request_id(), to,
                     s.ToString());
      }
    };
    // A lost rollback costs time, never a token: the next step's discard
    // truncates, and a void step is refused by the last stage.
    (void)PostCounted(to, RingSender::Lane::kSteps, std::move(send), rollback.ByteSizeLong());
  }
}

absl::StatusOr<bool> StageRuntime::DropSession(const std::string& session_id,
                                               const Caller& caller) {
  if (session_id.empty() || session_id.size() > kMaxWireIdBytes) {
    return absl::InvalidArgumentError("session_id must have 1 to 128 bytes");
  }
  if (!caller.is_node()) return absl::PermissionDeniedError("only an origin node may drop");
  return sessions_.Drop(SessionKey(caller.node_id, session_id));
}

absl::StatusOr<size_t> StageRuntime::DropAllSessions(const Caller& caller) {
  if (!caller.is_node()) return absl::PermissionDeniedError("only an origin node may drop");
  return sessions_.DropIdleWithPrefix(SessionKey(caller.node_id, ""));
}

absl::StatusOr<uint32_t> StageRuntime::AdoptPrefix(const v1::AdoptPrefixRequest& request,
                                                   const Caller& caller) {
  RINGLM_RETURN_IF_ERROR(ValidateAdoptPrefix(request, limits_));
  if (!caller.is_node()) return absl::PermissionDeniedError("only an origin node may adopt");
  const std::optional<LayerRange> held = range();
  if (!held.has_value()) return 0u;
  std::vector<SessionStore::PrefixClaim> claims;
  for (int i = 0; i < request.lengths_size(); ++i) {
    claims.push_back({request.lengths(i), request.digests(i)});
  }
  // Heads adopt for F32 requests only (the HTTP API's): KV computed from
  // hidden states rounded to F16 on the wire is not theirs to reuse.
  return sessions_.ForkLongestHeld(
      SessionKey(caller.node_id, request.session_id()), claims, [&](const KvCache& cache) {
        return cache.Holds(held->first, held->last) && !cache.rounded_inputs();
      });
}

void StageRuntime::Forget(const std::string& request_id, const std::string& origin) {
  absl::MutexLock lock(&mu_);
  (void)RecordRequestLocked(request_id, origin, /*cancel=*/true);
  parts_.Drop(request_id);
  if (to_forget_.size() < options_.max_requests) to_forget_.push_back(request_id);
}

StageRuntime::StepRef StageRuntime::RefOf(const v1::StageStepRequest& request) {
  return StepRef{request.request_id(), request.origin(), request.stage_index()};
}

void StageRuntime::SendStep(const std::string& to, v1::StageStepRequest step, StepRef from,
                            std::string what) {
  auto send = [this, to, step = std::move(step), from = std::move(from), what = std::move(what)] {
    if (absl::Status s = transport_->StageStep(to, step); !s.ok()) {
      ReportError(from, absl::Status(s.code(), absl::StrCat(what, ": ", s.message())));
    }
  };
  // To itself: straight into its own queue, which never blocks.
  if (to == self_id_) return send();
  const uint64_t bytes = step.ByteSizeLong();
  if (!PostCounted(to, RingSender::Lane::kSteps, std::move(send), bytes)) {
    ReportError(from, absl::ResourceExhaustedError(
                          absl::StrCat(what, ": the send queue to node ", to, " is full")));
  }
}

void StageRuntime::SendDelivery(const std::string& origin, v1::DeliverTokenRequest deliver) {
  auto send = [this, origin, deliver = std::move(deliver)] {
    v1::DeliverTokenReply reply;
    absl::Status s = transport_->DeliverToken(origin, deliver, &reply);
    if (!s.ok() && Allow("deliver")) {
      spdlog::warn("request {}: cannot deliver to origin {}: {}", deliver.request_id(), origin,
                   s.ToString());
    }
    // The origin is gone, or it says stop: nobody wants more.
    if (!s.ok() || reply.cancel()) Forget(deliver.request_id(), origin);
  };
  if (origin == self_id_) return send();
  const uint64_t bytes = deliver.ByteSizeLong();
  if (!PostCounted(origin, RingSender::Lane::kTokens, std::move(send), bytes)) {
    if (Allow("deliver")) {
      spdlog::warn("request {}: the send queue to origin {} is full", deliver.request_id(), origin);
    }
    Forget(deliver.request_id(), origin);
  }
}

bool StageRuntime::PostCounted(const std::string& to, RingSender::Lane lane,
                               std::function<void()> send, uint64_t bytes) {
  // Counted from here until the task is gone: run, or dropped unrun (a full
  // lane, a stopping sender).
  struct Counted {
    explicit Counted(StageRuntime* r) : runtime(r) {
      absl::MutexLock lock(&runtime->sends_mu_);
      ++runtime->sends_in_flight_;
    }
    ~Counted() {
      absl::MutexLock lock(&runtime->sends_mu_);
      --runtime->sends_in_flight_;
    }
    StageRuntime* runtime;
  };
  auto count = std::make_shared<Counted>(this);
  return sender_.Post(
      to, [count = std::move(count), send = std::move(send)] { send(); }, bytes, lane);
}

void StageRuntime::AwaitSendsDone(absl::Duration timeout) {
  absl::MutexLock lock(&sends_mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(sends_mu_) { return sends_in_flight_ == 0; };
  sends_mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

void StageRuntime::WorkerLoop() {
  ComputeLock* const turns = options_.compute_lock;
  size_t last_batch = 0;
  absl::Duration last_forward;
  while (queue_.AwaitSteps(1, absl::InfiniteDuration())) {
    if (turns != nullptr) {
      const auto asked = std::chrono::steady_clock::now();
      if (!turns->Acquire([this] { return queue_.stopped(); })) return;
      if (options_.turn_wait_seconds != nullptr) {
        options_.turn_wait_seconds->Observe(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count());
      }
    }
    queue_.AwaitSteps(last_batch, std::min(options_.gather_wait, last_forward / 10));
    std::vector<v1::StageStepRequest> batch = queue_.PopBatch(options_.batch);
    if (batch.empty()) break;  // stopped
    last_batch = batch.size();
    std::vector<std::string> forget;
    {
      absl::MutexLock lock(&mu_);
      forget.swap(to_forget_);
    }
    for (const std::string& id : forget) sampler_.Forget(id);
    const absl::Time start = absl::Now();
    {
      absl::MutexLock batch_lock(&batch_mu_);
      RunBatch(batch);
      // Rollbacks that came while the batch ran.
      ApplyTruncations();
    }
    last_forward = absl::Now() - start;
    if (turns != nullptr) {
      if (turns->OthersWaiting()) AwaitSendsDone(options_.handoff_wait);
      turns->Release();
    }
  }
  if (turns != nullptr) turns->Release();
}

// One step of a batch, ready to run: its session, and its input and output.
struct StageRuntime::Prepared {
  const v1::StageStepRequest* request;
  SessionStore::Lease lease;
  std::vector<float> hidden;
  std::vector<float> out;
};

absl::StatusOr<StageRuntime::Prepared> StageRuntime::Prepare(const v1::StageStepRequest& request,
                                                             const Bundle& bundle) {
  RINGLM_ASSIGN_OR_RETURN(SessionStore::Lease lease, AcquireSession(request, bundle));
  KvCache& cache = lease.cache();
  // Positions the last stage rejected since go first: the previous step's
  // drafts, the steps of a voided branch (it has dropped its own already).
  if (cache.n_positions() > request.position() &&
      cache.n_positions() <= uint64_t{request.position()} + request.discard()) {
    cache.Truncate(request.position());
  }
  if (cache.n_positions() != request.position()) {
    return absl::FailedPreconditionError(absl::StrCat("the session holds ", cache.n_positions(),
                                                      " positions here, the step expects ",
                                                      request.position()));
  }
  cache.set_writer(SerialOf(request.request_id()));
  Prepared p{&request, std::move(lease), {}, {}};
  if (request.stage_index() > 0) {
    RINGLM_ASSIGN_OR_RETURN(
        p.hidden, DecodeHidden(request.hidden(), request.tokens_size(), model_.config().n_embd));
    if (request.hidden().dtype() == v1::DTYPE_F16) p.lease.cache().MarkRoundedInputs();
  }
  RINGLM_RETURN_IF_ERROR(bundle.engine->Check(p.lease.cache(), InputOf(p)));
  return p;
}

StageInput StageRuntime::InputOf(const Prepared& p) {
  return StageInput{std::span<const int32_t>(p.request->tokens().data(), p.request->tokens_size()),
                    p.hidden};
}

void StageRuntime::RunBatch(const std::vector<v1::StageStepRequest>& batch) {
  // Every step of a batch runs the same layers (StepQueue::PopBatch).
  const v1::PlanStage& stage = batch.front().plan().stages(batch.front().stage_index());
  std::shared_ptr<const Bundle> bundle = BundleFor(stage.first_layer(), stage.last_layer());
  std::vector<Prepared> ready;
  ready.reserve(batch.size());
  for (const v1::StageStepRequest& request : batch) {
    if (IsDropped(request)) continue;
    if (bundle == nullptr) {
      ReportError(RefOf(request), absl::FailedPreconditionError(absl::StrCat(
                                      "this node no longer holds layers [", stage.first_layer(),
                                      ", ", stage.last_layer(), ")")));
      continue;
    }
    absl::StatusOr<Prepared> p = Prepare(request, *bundle);
    if (!p.ok()) {
      ReportError(RefOf(request), p.status());
      continue;
    }
    ready.push_back(*std::move(p));
  }
  if (ready.empty()) return;
  std::vector<StageBatchItem> items;
  for (Prepared& p : ready) {
    // A step that verifies drafts needs the logits of each of them too.
    const uint32_t rows = p.request->sample() ? p.request->drafts() + 1 : 1;
    items.push_back({&p.lease.cache(), InputOf(p), &p.out, rows});
  }
  const auto forward_start = std::chrono::steady_clock::now();
  if (absl::Status s = bundle->engine->ForwardBatch(items, LogitsMode::kLastPosition); !s.ok()) {
    for (const Prepared& p : ready) ReportError(RefOf(*p.request), s);  // Prepare checked each
    return;
  }
  if (options_.forward_seconds != nullptr) {
    options_.forward_seconds->Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - forward_start).count());
  }
  if (options_.batch_steps != nullptr) options_.batch_steps->Observe(ready.size());
  if (options_.batch_tokens != nullptr) {
    size_t tokens = 0;
    for (const Prepared& p : ready) tokens += p.request->tokens_size();
    options_.batch_tokens->Observe(tokens);
  }
  for (Prepared& p : ready) {
    if (absl::Status s = Continue(p, *bundle); !s.ok()) ReportError(RefOf(*p.request), s);
  }
}

absl::Status StageRuntime::Continue(Prepared& p, const Bundle& bundle) {
  const v1::StageStepRequest& request = *p.request;
  const uint32_t index = request.stage_index();
  if (!bundle.weights->is_last()) {
    const uint64_t n = request.tokens_size();
    // The next stage holds the parts if this one got them earlier.
    v1::StageStepRequest next = NextStep(request, index + 1, !request.parts_omitted());
    next.set_position(request.position());
    next.set_reuse_len(request.reuse_len());  // every stage checks the claimed prefix
    next.set_reuse_digest(request.reuse_digest());
    next.set_fork_from(request.fork_from());
    *next.mutable_tokens() = request.tokens();
    next.set_sample(request.sample());
    next.set_generated(request.generated());
    next.set_drafts(request.drafts());
    next.set_discard(request.discard());
    next.set_branch(request.branch());
    *next.mutable_hidden() = EncodeHidden(p.out, n, model_.config().n_embd, request.wire_dtype());
    SendStep(request.plan().stages(index + 1).node_id(), std::move(next), RefOf(request),
             absl::StrCat("forwarding to stage ", index + 1));
    return absl::OkStatus();
  }
  if (!request.sample()) {  // a prompt chunk that is not the last
    ReportPromptProgress(request);
    return absl::OkStatus();
  }
  return Sample(request, p.out, p.lease.cache());
}

void StageRuntime::ReportPromptProgress(const v1::StageStepRequest& request) {
  const uint32_t end = request.position() + static_cast<uint32_t>(request.tokens_size());
  v1::DeliverTokenRequest note;
  note.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  note.set_request_id(request.request_id());
  note.set_prompt_positions(end);
  SendDelivery(request.origin(), std::move(note));
}

absl::Status StageRuntime::Sample(const v1::StageStepRequest& request,
                                  const std::vector<float>& logits, KvCache& cache) {
  RINGLM_ASSIGN_OR_RETURN(LastStageSampler::Outcome outcome,
                          sampler_.Sample(request, logits, cache.tokens()));
  // The session keeps the drafts that matched; the other stages drop the
  // rest when the next step comes (its `discard`), or by the rollback.
  cache.Truncate(outcome.valid);
  if (options_.steps_ahead != nullptr && outcome.steps_ahead > 0) {
    options_.steps_ahead->Increment(outcome.steps_ahead);
  }
  if (options_.steps_voided != nullptr && outcome.steps_voided > 0) {
    options_.steps_voided->Increment(outcome.steps_voided);
  }
  // One call for the step's tokens: each call is a round trip to the
  // origin on its lane of tokens.
  v1::DeliverTokenRequest deliver = std::move(outcome.deliveries.front());
  for (size_t i = 1; i < outcome.deliveries.size(); ++i) {
    *deliver.add_then() = std::move(outcome.deliveries[i]);
  }
  SendDelivery(request.origin(), std::move(deliver));
  if (outcome.rollback.has_value()) {
    {
      // Its steps of the voided branches that reach this stage are dropped too.
      absl::MutexLock lock(&mu_);
      auto it = requests_.find(request.request_id());
      if (it != requests_.end()) {
        it->second.void_below = std::max(it->second.void_below, outcome.rollback->branch);
      }
    }
    SendRollback(request, *outcome.rollback);
  }
  if (outcome.deliveries.back().finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
    absl::MutexLock lock(&mu_);
    parts_.Drop(request.request_id());  // the request is over
    return absl::OkStatus();
  }
  // The tokens go around the ring at once, beside their delivery: if the
  // origin turns out to be gone or to want no more, Forget drops the
  // request here when those steps come back.
  for (LastStageSampler::NextStep& planned : outcome.steps) {
    // Stage 0 holds the parts: they came with the request's first step.
    v1::StageStepRequest next = NextStep(request, 0, /*with_parts=*/false);
    next.set_position(planned.position);
    next.set_discard(planned.discard);
    next.set_branch(planned.branch);
    next.set_drafts(static_cast<uint32_t>(planned.tokens.size()) - 1);
    next.mutable_tokens()->Add(planned.tokens.begin(), planned.tokens.end());
    next.set_sample(true);
    next.set_generated(planned.generated);
    SendStep(request.plan().stages(0).node_id(), std::move(next), RefOf(request),
             "sending the token to stage 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<SessionStore::Lease> StageRuntime::AcquireSession(
    const v1::StageStepRequest& request, const Bundle& bundle) {
  const LayerRange range = bundle.weights->range();
  const std::string key = SessionKey(request.origin(), request.session_id());
  auto make_cache = [&] { return bundle.engine->NewCache(model_.context_size()); };
  if (request.reuse_len() == 0) {
    RINGLM_ASSIGN_OR_RETURN(SessionStore::Lease lease, sessions_.Acquire(key, make_cache));
    if (!lease.cache().Holds(range.first, range.last)) lease.Replace(make_cache());
    if (request.position() == 0) lease.cache().Truncate(0);  // a fresh start
    return lease;
  }
  // The head claims this stage holds the first reuse_len tokens: prove it
  // before anything is forked or truncated.
  const uint32_t reuse = request.reuse_len();
  if (!request.fork_from().empty()) {
    const std::string from = SessionKey(request.origin(), request.fork_from());
    if (absl::Status s = sessions_.Fork(from, key, reuse, request.reuse_digest()); !s.ok()) {
      return CacheMiss(request, s.message());
    }
  }
  absl::StatusOr<SessionStore::Lease> lease = sessions_.AcquireExisting(key);
  if (!lease.ok()) return CacheMiss(request, lease.status().message());
  KvCache& cache = lease->cache();
  if (!cache.Holds(range.first, range.last)) {
    return CacheMiss(request, "the session holds KV of another layer range");
  }
  if (cache.n_positions() < reuse ||
      !ConstantTimeEquals(TokenDigest(std::span<const int32_t>(cache.tokens().data(), reuse)),
                          request.reuse_digest())) {
    return CacheMiss(request, "the session's tokens differ from the claim");
  }
  cache.Truncate(reuse);
  return lease;
}

void StageRuntime::ReportError(const StepRef& step, const absl::Status& status) {
  if (Allow("failed")) {
    spdlog::warn("request {}: stage {} failed: {}", step.request_id, step.stage_index,
                 status.ToString());
  }
  v1::DeliverTokenRequest deliver;
  deliver.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  deliver.set_request_id(step.request_id);
  deliver.set_finish_reason(v1::FINISH_REASON_ERROR);
  deliver.set_error(
      absl::StrCat("stage ", step.stage_index, " (node ", self_id_, "): ", status.message()));
  deliver.set_error_code(static_cast<int32_t>(status.code()));
  deliver.set_cache_miss(IsCacheMiss(status));
  SendDelivery(step.origin, std::move(deliver));
  Forget(step.request_id, step.origin);
}

}  // namespace ringlm
