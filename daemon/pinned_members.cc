#include "daemon/pinned_members.h"

#include <optional>
#include <utility>

#include "security/crypto.h"

namespace ringlm {

PinnedMembers::PinnedMembers(std::string self_id, std::string self_spki, const PeerTable* peers)
    : self_id_(std::move(self_id)), self_spki_(std::move(self_spki)), peers_(peers) {}

bool PinnedMembers::IsPinnedMember(const std::string& node_id, const std::string& spki) const {
  if (node_id == self_id_) return ConstantTimeEquals(spki, self_spki_);
  std::optional<PeerInfo> peer = peers_->Find(node_id);
  return peer.has_value() && peer->verified && ConstantTimeEquals(spki, peer->spki_fingerprint);
}

}  // namespace ringlm
