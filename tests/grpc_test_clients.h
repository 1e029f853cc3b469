// gRPC stubs for tests that talk to a LoopbackCluster's nodes directly: as
// a member (with that node's own key, an insider), as a client, or as an
// outsider of several kinds. Only loopback addresses.
#ifndef RINGLM_TESTS_GRPC_TEST_CLIENTS_H_
#define RINGLM_TESTS_GRPC_TEST_CLIENTS_H_

#include <memory>
#include <string>

#include "cli/cluster_client.h"
#include "proto/ringlm.grpc.pb.h"
#include "tests/loopback_cluster.h"

namespace ringlm::testing {

// The id node i of `cluster` runs under (read from its state dir).
std::string NodeIdOf(const LoopbackCluster& cluster, size_t i);

// A stub to `address` that presents node `as_node`'s own certificate key:
// what that member itself could send.
std::unique_ptr<v1::RingNode::Stub> MemberStub(const LoopbackCluster& cluster, size_t as_node,
                                               const std::string& address);

// What the CLI uses against `cluster` (a client certificate, or plaintext
// for an insecure cluster).
ClientSecurity ClientSecurityFor(const LoopbackCluster& cluster);

// Outsiders: plaintext; TLS that trusts the cluster CA but has no
// certificate; or a full identity under another cluster key.
enum class Outsider { kPlaintext, kNoCertificate, kWrongKey };
std::unique_ptr<v1::RingNode::Stub> OutsiderStub(const LoopbackCluster& cluster, Outsider kind,
                                                 const std::string& address);

}  // namespace ringlm::testing

#endif  // RINGLM_TESTS_GRPC_TEST_CLIENTS_H_
