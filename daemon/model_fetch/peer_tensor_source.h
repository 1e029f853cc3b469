// A member that sends model tensors over gRPC: the TensorSource the
// daemon's fetcher uses (model_store/model_fetcher.h).
#ifndef RINGLM_DAEMON_MODEL_FETCH_PEER_TENSOR_SOURCE_H_
#define RINGLM_DAEMON_MODEL_FETCH_PEER_TENSOR_SOURCE_H_

#include <string>
#include <vector>

#include "daemon/rpc/peer_client.h"
#include "model_store/model_fetcher.h"
#include "model_store/tensor_manifest.h"

namespace ringlm {

// A GetModel request for the model with `fingerprint`.
v1::GetModelRequest GetModelRequestFor(const std::string& fingerprint, bool with_manifest = false);

// Decodes GetModelReply.held for a model of `n_tensors` tensors;
// InvalidArgument when the bitmap has another length.
absl::StatusOr<std::vector<bool>> DecodeHeld(const std::string& bits, size_t n_tensors);

// One peer, by node id and proven address, serving the model with
// `fingerprint`. Chunks arrive in order and are handed on as they come; the
// fetcher verifies them. Thread-safe (PeerClient is). Borrows `client`.
class PeerTensorSource : public TensorSource {
 public:
  PeerTensorSource(PeerClient* client, std::string node_id, std::string address,
                   std::string fingerprint, const TensorManifest* manifest);

  const std::string& name() const override { return node_id_; }
  // Empty when the peer cannot answer (it is then not used).
  std::vector<bool> Holdings() override;
  absl::Status Fetch(size_t tensor, uint64_t first_chunk,
                     const std::function<bool(uint64_t, std::string_view)>& on_chunk) override;

 private:
  PeerClient* const client_;
  const std::string node_id_;
  const std::string address_;
  const std::string fingerprint_;
  const TensorManifest* const manifest_;
};

}  // namespace ringlm

#endif  // RINGLM_DAEMON_MODEL_FETCH_PEER_TENSOR_SOURCE_H_
