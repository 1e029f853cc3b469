#include "daemon/origin/prefix_adoption.h"

#include <algorithm>

#include "inference/token_digest.h"

namespace ringlm {
namespace {

constexpr uint32_t kBlockTokens = 16;

// Offered lengths in `offer` that are at most `n`.
void KeepUpTo(v1::AdoptPrefixRequest& offer, uint32_t n) {
  int keep = 0;
  while (keep < offer.lengths_size() && offer.lengths(keep) <= n) ++keep;
  offer.mutable_lengths()->Truncate(keep);
  offer.mutable_digests()->DeleteSubrange(keep, offer.digests_size() - keep);
}

}  // namespace

v1::AdoptPrefixRequest AdoptionOffer(const std::string& session_id,
                                     std::span<const int32_t> prompt) {
  v1::AdoptPrefixRequest offer;
  offer.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  offer.set_session_id(session_id);
  if (prompt.size() < 2) return offer;
  const uint32_t longest = static_cast<uint32_t>(prompt.size() - 1);
  // At most kMaxAdoptClaims - 1 stride lengths below `longest`, plus it.
  const uint32_t per_claim = (longest + kMaxAdoptClaims - 2) / (kMaxAdoptClaims - 1);
  const uint32_t stride =
      std::max(kBlockTokens, (per_claim + kBlockTokens - 1) / kBlockTokens * kBlockTokens);
  TokenDigester digester;
  uint32_t fed = 0;
  auto add = [&](uint32_t n) {
    digester.Add(prompt.subspan(fed, n - fed));
    fed = n;
    offer.add_lengths(n);
    offer.add_digests(digester.Digest());
  };
  for (uint32_t n = stride; n < longest; n += stride) add(n);
  add(longest);
  return offer;
}

uint32_t AdoptPrefix(Transport& transport, const v1::Plan& plan, const std::string& session_id,
                     std::span<const int32_t> prompt) {
  v1::AdoptPrefixRequest offer = AdoptionOffer(session_id, prompt);
  uint32_t held = offer.lengths_size() > 0 ? offer.lengths(offer.lengths_size() - 1) : 0;
  for (const v1::PlanStage& stage : plan.stages()) {
    if (held == 0) break;
    absl::StatusOr<uint32_t> adopted = transport.AdoptPrefix(stage.node_id(), offer);
    const auto& lengths = offer.lengths();
    if (!adopted.ok() || std::find(lengths.begin(), lengths.end(), *adopted) == lengths.end()) {
      return 0;
    }
    held = *adopted;
    KeepUpTo(offer, held);
  }
  return held;
}

}  // namespace ringlm
