#include "daemon/stage_runtime.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "daemon/proto_convert.h"
#include "inference/token_digest.h"
#include "spdlog/spdlog.h"

namespace ringlm {
namespace {

constexpr size_t kMaxIdLength = 128;
constexpr size_t kMaxSamplers = 4096;
constexpr auto kSamplerIdleLimit = std::chrono::minutes(10);

absl::Status CheckId(const std::string& id, const char* what) {
  if (id.empty() || id.size() > kMaxIdLength) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " must have 1 to ", kMaxIdLength, " bytes, got ", id.size()));
  }
  return absl::OkStatus();
}

// The header fields every step of a request repeats.
v1::StageStepRequest NextStep(const v1::StageStepRequest& from, uint32_t stage_index) {
  v1::StageStepRequest next;
  next.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  next.set_request_id(from.request_id());
  next.set_session_id(from.session_id());
  *next.mutable_plan() = from.plan();
  next.set_stage_index(stage_index);
  next.set_origin(from.origin());
  *next.mutable_sampling() = from.sampling();
  *next.mutable_limits() = from.limits();
  next.set_wire_dtype(from.wire_dtype());
  next.set_origin_address(from.origin_address());
  return next;
}

v1::PlanStage OriginOf(const v1::StageStepRequest& request) {
  v1::PlanStage origin;
  origin.set_node_id(request.origin());
  origin.set_address(request.origin_address());
  return origin;
}

constexpr char kCacheMissPayload[] = "ringlm.dev/cache-miss";

absl::Status CacheMiss(const std::string& why) {
  absl::Status s = absl::FailedPreconditionError(absl::StrCat("prefix cache miss: ", why));
  s.SetPayload(kCacheMissPayload, absl::Cord("1"));
  return s;
}

bool IsCacheMiss(const absl::Status& s) { return s.GetPayload(kCacheMissPayload).has_value(); }

}  // namespace

StageRuntime::StageRuntime(const Model& model, ThreadPool* pool, Transport* transport,
                           std::string self_id, StageOptions options)
    : model_(model),
      pool_(pool),
      transport_(transport),
      self_id_(std::move(self_id)),
      options_(options),
      sessions_(options.sessions),
      queue_("stage") {}

StageRuntime::~StageRuntime() { Stop(); }

void StageRuntime::Stop() { queue_.Stop(); }

absl::Status StageRuntime::SetRange(std::optional<LayerRange> range) {
  std::shared_ptr<Bundle> bundle;
  if (range.has_value()) {
    RINGLM_ASSIGN_OR_RETURN(StageWeights weights, model_.LoadStage(*range));
    bundle = std::make_shared<Bundle>();
    bundle->weights = std::make_unique<StageWeights>(std::move(weights));
    bundle->engine = std::make_unique<StageEngine>(model_.config(), *bundle->weights, pool_);
  }
  {
    absl::MutexLock lock(&mu_);
    previous_ = current_;
    current_ = bundle;
  }
  // Idle sessions hold KV of the old range; a request between steps then
  // fails cleanly on its next step (position mismatch) instead of mixing.
  sessions_.DropAllIdle();
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

absl::Status StageRuntime::Enqueue(v1::StageStepRequest request) {
  if (request.protocol_version() != v1::PROTOCOL_VERSION_CURRENT) {
    return absl::InvalidArgumentError(absl::StrCat("protocol version ", request.protocol_version(),
                                                   ", expected ", v1::PROTOCOL_VERSION_CURRENT));
  }
  RINGLM_RETURN_IF_ERROR(CheckId(request.request_id(), "request_id"));
  RINGLM_RETURN_IF_ERROR(CheckId(request.session_id(), "session_id"));
  if (request.origin().empty()) return absl::InvalidArgumentError("step has no origin");
  const ModelConfig& config = model_.config();
  RINGLM_RETURN_IF_ERROR(ValidatePlan(request.plan(), config.n_layer, model_.fingerprint()));
  if (request.stage_index() >= static_cast<uint32_t>(request.plan().stages_size())) {
    return absl::InvalidArgumentError(absl::StrCat("stage_index ", request.stage_index(),
                                                   " is outside the plan's ",
                                                   request.plan().stages_size(), " stages"));
  }
  const v1::PlanStage& stage = request.plan().stages(request.stage_index());
  if (stage.node_id() != self_id_) {
    return absl::InvalidArgumentError(absl::StrCat("step for stage ", request.stage_index(),
                                                   " is meant for node ", stage.node_id(), ", not ",
                                                   self_id_));
  }
  const int n = request.tokens_size();
  if (n == 0) return absl::InvalidArgumentError("step has no tokens");
  if (static_cast<uint64_t>(request.position()) + n > model_.context_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("positions [", request.position(), ", ", request.position() + n,
                     ") pass the context size ", model_.context_size()));
  }
  for (int i = 0; i < n; ++i) {
    if (request.tokens(i) < 0 || static_cast<uint32_t>(request.tokens(i)) >= config.n_vocab) {
      return absl::InvalidArgumentError(absl::StrCat("token id ", request.tokens(i), " at index ",
                                                     i, " is outside the vocabulary [0, ",
                                                     config.n_vocab, ")"));
    }
  }
  if (request.stage_index() == 0) {
    if (request.has_hidden()) {
      return absl::InvalidArgumentError("stage 0 takes token ids, not hidden states");
    }
  } else {
    const v1::Tensor& h = request.hidden();
    if (h.shape_size() != 2 || h.shape(0) != static_cast<uint64_t>(n) ||
        h.shape(1) != config.n_embd) {
      return absl::InvalidArgumentError(
          absl::StrCat("hidden states must have shape [", n, ", ", config.n_embd, "]"));
    }
  }
  if (request.reuse_len() > 0) {
    if (request.position() != request.reuse_len() || request.reuse_digest().size() != 32) {
      return absl::InvalidArgumentError(
          "a reused prefix needs position == reuse_len and a 32-byte digest");
    }
  } else if (!request.fork_from().empty()) {
    return absl::InvalidArgumentError("fork_from needs reuse_len > 0");
  }
  if (request.limits().max_tokens() < 0) {
    return absl::InvalidArgumentError("max_tokens must be >= 0");
  }
  RINGLM_RETURN_IF_ERROR(SamplingFromProto(request.sampling()).Validate());
  // Well-formed; now, does this node hold the plan's layers for it?
  if (BundleFor(stage.first_layer(), stage.last_layer()) == nullptr) {
    std::optional<LayerRange> held = range();
    return absl::FailedPreconditionError(
        absl::StrCat("plan epoch ", request.plan().epoch(), " gives this node layers [",
                     stage.first_layer(), ", ", stage.last_layer(), ") but it holds ",
                     held ? absl::StrCat("[", held->first, ", ", held->last, ")") : "none"));
  }
  if (IsCancelled(request.request_id())) return absl::OkStatus();  // late step: drop quietly
  if (!queue_.Post([this, r = std::move(request)] { Process(r); })) {
    return absl::ResourceExhaustedError("the stage queue is full or stopping");
  }
  return absl::OkStatus();
}

void StageRuntime::Cancel(const std::string& request_id) {
  {
    absl::MutexLock lock(&mu_);
    const auto now = std::chrono::steady_clock::now();
    for (auto it = cancelled_.begin(); it != cancelled_.end();) {
      it = now - it->second > options_.cancel_memory ? cancelled_.erase(it) : std::next(it);
    }
    cancelled_[request_id] = now;
  }
  queue_.Post([this, request_id] { samplers_.erase(request_id); });
}

bool StageRuntime::IsCancelled(const std::string& request_id) const {
  absl::MutexLock lock(&mu_);
  return cancelled_.count(request_id) > 0;
}

void StageRuntime::ForgetRequest(const std::string& request_id) { samplers_.erase(request_id); }

void StageRuntime::Process(const v1::StageStepRequest& request) {
  if (IsCancelled(request.request_id())) return;
  if (absl::Status s = Run(request); !s.ok()) ReportError(request, s);
}

absl::Status StageRuntime::Run(const v1::StageStepRequest& request) {
  const uint32_t index = request.stage_index();
  const v1::PlanStage& stage = request.plan().stages(index);
  std::shared_ptr<const Bundle> bundle = BundleFor(stage.first_layer(), stage.last_layer());
  if (bundle == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this node no longer holds layers [", stage.first_layer(), ", ", stage.last_layer(), ")"));
  }
  const StageEngine& engine = *bundle->engine;
  RINGLM_ASSIGN_OR_RETURN(SessionStore::Lease lease, AcquireSession(request, *bundle));
  KvCache& cache = lease.cache();
  if (cache.n_positions() != request.position()) {
    return absl::FailedPreconditionError(
        absl::StrCat("session '", request.session_id(), "' holds ", cache.n_positions(),
                     " positions here, the step expects ", request.position()));
  }
  const uint64_t n = request.tokens_size();
  const uint64_t n_embd = model_.config().n_embd;
  std::vector<float> hidden;
  if (index > 0) {
    RINGLM_ASSIGN_OR_RETURN(hidden, DecodeHidden(request.hidden(), n, n_embd));
  }
  std::vector<float> out;
  const auto forward_start = std::chrono::steady_clock::now();
  RINGLM_RETURN_IF_ERROR(engine.Forward(
      cache, StageInput{std::span<const int32_t>(request.tokens().data(), n), hidden},
      LogitsMode::kLastPosition, &out));
  if (options_.forward_seconds != nullptr) {
    options_.forward_seconds->Observe(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - forward_start).count());
  }
  const uint32_t n_positions = cache.n_positions();

  if (!bundle->weights->is_last()) {
    v1::StageStepRequest next = NextStep(request, index + 1);
    next.set_position(request.position());
    next.set_reuse_len(request.reuse_len());  // every stage checks the claimed prefix
    next.set_reuse_digest(request.reuse_digest());
    next.set_fork_from(request.fork_from());
    *next.mutable_tokens() = request.tokens();
    next.set_sample(request.sample());
    next.set_generated(request.generated());
    *next.mutable_hidden() = EncodeHidden(out, n, n_embd, request.wire_dtype());
    absl::Status s = transport_->StageStep(request.plan().stages(index + 1), next);
    if (!s.ok()) {
      return absl::Status(s.code(),
                          absl::StrCat("forwarding to stage ", index + 1, ": ", s.message()));
    }
    return absl::OkStatus();
  }
  if (!request.sample()) return absl::OkStatus();  // a prompt chunk that is not the last
  return Sample(request, out, n_positions);
}

absl::Status StageRuntime::Sample(const v1::StageStepRequest& request,
                                  const std::vector<float>& logits, uint32_t n_positions) {
  const auto now = std::chrono::steady_clock::now();
  if (samplers_.size() >= kMaxSamplers) {
    for (auto it = samplers_.begin(); it != samplers_.end();) {
      it = now - it->second.last_used > kSamplerIdleLimit ? samplers_.erase(it) : std::next(it);
    }
  }
  SamplerState& state = samplers_[request.request_id()];
  if (state.sampler == nullptr) {
    state.sampler = std::make_unique<Sampler>(SamplingFromProto(request.sampling()));
  }
  state.last_used = now;
  const int32_t token = state.sampler->Sample(logits);
  state.sampler->Accept(token);

  const uint32_t index = request.generated();
  v1::DeliverTokenRequest deliver;
  deliver.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  deliver.set_request_id(request.request_id());
  deliver.set_token(token);
  deliver.set_index(index);
  deliver.set_reporter(self_id_);
  if (!request.limits().ignore_eos() && model_.tokenizer().IsEndOfGeneration(token)) {
    deliver.set_finish_reason(v1::FINISH_REASON_STOP);
  } else if (static_cast<int64_t>(index) + 1 >= request.limits().max_tokens() ||
             n_positions >= model_.context_size()) {
    deliver.set_finish_reason(v1::FINISH_REASON_LENGTH);
  }
  v1::DeliverTokenReply reply;
  if (absl::Status s = transport_->DeliverToken(OriginOf(request), deliver, &reply); !s.ok()) {
    spdlog::warn("request {}: cannot deliver token to origin {}: {}", request.request_id(),
                 request.origin(), s.ToString());
    ForgetRequest(request.request_id());
    return absl::OkStatus();  // the origin is gone: nobody to report to
  }
  if (reply.cancel() || deliver.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
    ForgetRequest(request.request_id());
    return absl::OkStatus();
  }
  v1::StageStepRequest next = NextStep(request, 0);
  next.set_position(n_positions);
  next.add_tokens(token);
  next.set_sample(true);
  next.set_generated(index + 1);
  absl::Status s = transport_->StageStep(request.plan().stages(0), next);
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("sending the token to stage 0: ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<SessionStore::Lease> StageRuntime::AcquireSession(
    const v1::StageStepRequest& request, const Bundle& bundle) {
  const uint32_t n_layers = bundle.weights->range().size();
  auto make_cache = [&] { return bundle.engine->NewCache(model_.context_size()); };
  if (request.reuse_len() == 0) {
    RINGLM_ASSIGN_OR_RETURN(SessionStore::Lease lease,
                            sessions_.Acquire(request.session_id(), make_cache));
    if (lease.cache().n_layers() != n_layers) lease.cache() = make_cache();
    if (request.position() == 0) lease.cache().Truncate(0);  // a fresh start
    return lease;
  }
  // The head claims this stage holds the first reuse_len tokens: prove it.
  const uint32_t reuse = request.reuse_len();
  if (!request.fork_from().empty()) {
    if (absl::Status s = sessions_.Fork(request.fork_from(), request.session_id(), reuse);
        !s.ok()) {
      return CacheMiss(
          absl::StrCat("cannot fork session '", request.fork_from(), "': ", s.message()));
    }
  }
  absl::StatusOr<SessionStore::Lease> lease = sessions_.AcquireExisting(request.session_id());
  if (!lease.ok()) return CacheMiss(std::string(lease.status().message()));
  KvCache& cache = lease->cache();
  if (cache.n_layers() != n_layers) {
    return CacheMiss("the session holds KV of another layer range");
  }
  if (cache.n_positions() < reuse) {
    return CacheMiss(absl::StrCat("the session holds ", cache.n_positions(),
                                  " positions, fewer than the ", reuse, " claimed"));
  }
  if (TokenDigest(std::span<const int32_t>(cache.tokens().data(), reuse)) !=
      request.reuse_digest()) {
    return CacheMiss(absl::StrCat("the session's first ", reuse, " tokens differ from the claim"));
  }
  cache.Truncate(reuse);
  return lease;
}

void StageRuntime::ReportError(const v1::StageStepRequest& request, const absl::Status& status) {
  ForgetRequest(request.request_id());
  spdlog::warn("request {}: stage {} failed: {}", request.request_id(), request.stage_index(),
               status.ToString());
  v1::DeliverTokenRequest deliver;
  deliver.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  deliver.set_request_id(request.request_id());
  deliver.set_finish_reason(v1::FINISH_REASON_ERROR);
  deliver.set_error(
      absl::StrCat("stage ", request.stage_index(), " (node ", self_id_, "): ", status.message()));
  deliver.set_error_code(static_cast<int32_t>(status.code()));
  deliver.set_cache_miss(IsCacheMiss(status));
  deliver.set_reporter(self_id_);
  v1::DeliverTokenReply reply;
  if (absl::Status s = transport_->DeliverToken(OriginOf(request), deliver, &reply); !s.ok()) {
    spdlog::warn("request {}: cannot report the error to origin {}: {}", request.request_id(),
                 request.origin(), s.ToString());
  }
}

}  // namespace ringlm
