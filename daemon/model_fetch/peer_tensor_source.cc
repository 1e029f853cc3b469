#include "daemon/model_fetch/peer_tensor_source.h"

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace ringlm {

v1::GetModelRequest GetModelRequestFor(const std::string& fingerprint, bool with_manifest) {
  v1::GetModelRequest request;
  request.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  request.set_model_fingerprint(fingerprint);
  request.set_with_manifest(with_manifest);
  return request;
}

absl::StatusOr<std::vector<bool>> DecodeHeld(const std::string& bits, size_t n_tensors) {
  if (bits.size() != (n_tensors + 7) / 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("a holdings bitmap of ", bits.size(), " bytes for ", n_tensors, " tensors"));
  }
  std::vector<bool> held(n_tensors);
  for (size_t i = 0; i < n_tensors; ++i) held[i] = (bits[i / 8] >> (i % 8)) & 1;
  return held;
}

PeerTensorSource::PeerTensorSource(PeerClient* client, std::string node_id, std::string address,
                                   std::string fingerprint, const TensorManifest* manifest)
    : client_(client),
      node_id_(std::move(node_id)),
      address_(std::move(address)),
      fingerprint_(std::move(fingerprint)),
      manifest_(manifest) {}

std::vector<bool> PeerTensorSource::Holdings() {
  v1::GetModelReply reply;
  absl::Status s = client_->GetModel(address_, GetModelRequestFor(fingerprint_), &reply);
  if (s.ok() && reply.manifest_digest() != manifest_->digest()) {
    s = absl::DataLossError("it serves the model under another manifest");
  }
  absl::StatusOr<std::vector<bool>> held =
      s.ok() ? DecodeHeld(reply.held(), manifest_->tensors().size()) : s;
  if (!held.ok()) {
    spdlog::warn("model fetch: not using {} as a source: {}", node_id_, held.status().ToString());
    return {};
  }
  return *std::move(held);
}

absl::Status PeerTensorSource::Fetch(
    size_t tensor, uint64_t first_chunk,
    const std::function<bool(uint64_t, std::string_view)>& on_chunk) {
  if (tensor >= manifest_->tensors().size()) {
    return absl::InvalidArgumentError(absl::StrCat("no tensor ", tensor));
  }
  const TensorDigest& t = manifest_->tensors()[tensor];
  v1::FetchTensorRequest request;
  request.set_protocol_version(v1::PROTOCOL_VERSION_CURRENT);
  request.set_model_fingerprint(fingerprint_);
  request.set_tensor(static_cast<uint32_t>(tensor));
  request.set_first_chunk(first_chunk);
  const uint64_t done = std::min(t.size, first_chunk * manifest_->chunk_bytes());
  return client_->FetchTensor(address_, request, t.size - done, [&](const v1::TensorChunk& c) {
    return on_chunk(c.chunk(), c.data());
  });
}

}  // namespace ringlm
