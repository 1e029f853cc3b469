// Who may call the ring's methods of a node with a cluster key.
#ifndef RINGLM_DAEMON_PINNED_MEMBERS_H_
#define RINGLM_DAEMON_PINNED_MEMBERS_H_

#include <string>

#include "discovery/peer_table.h"

namespace ringlm {

// PinnedMembers
//
// Purpose: the membership proof of a secure call (docs/security.md). A
// caller that presents a certificate with node id N and key K is a member
// when N is this node and K its own key, or when the peer table holds N,
// verified (a TLS health call proved N serves K at its address), and pinned
// to K. Keys compare in constant time.
// Ownership: borrows the peer table, which must outlive it.
// Thread-safety: thread-safe (the peer table is; the rest is immutable).
class PinnedMembers {
 public:
  // `self_spki`: the SPKI fingerprint of this node's certificate key; empty
  // without a cluster key (then only an empty key proves this node).
  PinnedMembers(std::string self_id, std::string self_spki, const PeerTable* peers);

  // True when `node_id` is this node with its own key, or a verified peer
  // pinned to the key with SPKI fingerprint `spki`.
  bool IsPinnedMember(const std::string& node_id, const std::string& spki) const;

 private:
  const std::string self_id_;
  const std::string self_spki_;
  const PeerTable* const peers_;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_PINNED_MEMBERS_H_
