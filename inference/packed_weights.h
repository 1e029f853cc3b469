// Copies of weight matrices in the layout the kernels read fastest on this
// CPU (inference/ops/weight_layout.h), made once per model and shared.
#ifndef RINGLM_INFERENCE_PACKED_WEIGHTS_H_
#define RINGLM_INFERENCE_PACKED_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "inference/stage_weights.h"

namespace ringlm {

// The packed copies of one model's matrices, keyed by the mapped bytes they
// copy. Every StageWeights of the model packs through the same store, so the
// stages of the old and the new partition share the copy of a layer both
// hold instead of holding two. A copy lives as long as a stage holds it.
// Thread-safe.
class PackedWeights {
 public:
  // A view of a copy of `m` (GGUF rows) in `layout`, made now or shared
  // with an earlier call for the same bytes. The copy stays while `*holder`
  // does. ResourceExhausted when the memory for a copy cannot be had.
  // Preconditions: m.layout is kGguf; `layout` is kQ4_0x8 and fits m's type
  // and rows (per expert, for a matrix of all the experts of a tensor).
  absl::StatusOr<WeightMatrix> Pack(const WeightMatrix& m, WeightLayout layout,
                                    std::shared_ptr<const void>* holder);

 private:
  struct Copy;
  absl::Mutex mu_;
  // Source bytes (start, length) -> the copy, while someone holds it.
  absl::flat_hash_map<std::pair<const void*, uint64_t>, std::weak_ptr<const Copy>> copies_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_PACKED_WEIGHTS_H_
