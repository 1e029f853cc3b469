#include "inference/packed_weights.h"

#include <sys/mman.h>

#include <cassert>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "inference/ops/quant.h"
#include "inference/ops/weight_layout.h"

namespace ringlm {

// Anonymous memory of its own (huge pages where the kernel gives them: a
// decode step walks all of it).
struct PackedWeights::Copy {
  void* data = nullptr;
  uint64_t bytes = 0;
  ~Copy() {
    if (data != nullptr) ::munmap(data, bytes);
  }
};

absl::StatusOr<WeightMatrix> PackedWeights::Pack(const WeightMatrix& m, WeightLayout layout,
                                                 std::shared_ptr<const void>* holder) {
  assert(m.layout == WeightLayout::kGguf && layout == WeightLayout::kQ4_0x8 &&
         LayoutFits(layout, m.type, m.rows));
  const uint64_t bytes = RowBytes(m.type, m.cols) * static_cast<uint64_t>(m.rows);
  const std::pair<const void*, uint64_t> key{m.data, bytes};
  absl::MutexLock lock(&mu_);
  std::shared_ptr<const Copy> copy;
  if (auto it = copies_.find(key); it != copies_.end()) copy = it->second.lock();
  if (copy == nullptr) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot map ", bytes, " bytes for packed weights: ", std::strerror(errno)));
    }
    ::madvise(p, bytes, MADV_HUGEPAGE);  // a hint; fine to be refused
    PackQ4_0x8(m.data, m.rows, m.cols, p);
    ::mprotect(p, bytes, PROT_READ);
    auto made = std::make_shared<Copy>();
    made->data = p;
    made->bytes = bytes;
    copy = made;
    // Forget copies nobody holds any more, then keep this one's address.
    absl::erase_if(copies_, [](const auto& kv) { return kv.second.expired(); });
    copies_[key] = copy;
  }
  *holder = copy;
  WeightMatrix packed = m;
  packed.data = copy->data;
  packed.layout = layout;
  return packed;
}

}  // namespace ringlm
