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
  // `m` as the kernels read it fastest: `m` itself when that is its layout
  // already (WeightLayout::kGguf on this CPU, or a type that has no other),
  // else a view of a copy in that layout, made now or shared with an earlier
  // call for the same bytes. The copy stays while `*holder` does.
  // ResourceExhausted when the memory for a copy cannot be had.
  // `rows_per_matrix` is m.rows, or an expert's rows when m holds all the
  // experts of a tensor one after another.
  absl::StatusOr<WeightMatrix> Pack(const WeightMatrix& m, int64_t rows_per_matrix,
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
