#include "daemon/stage/ring_sender.h"

#include <vector>

namespace ringlm {

RingSender::RingSender(Limits limits) : limits_(limits) {}

RingSender::~RingSender() { Stop(); }

bool RingSender::Post(const std::string& to, std::function<void()> send, uint64_t bytes,
                      Lane lane_kind) {
  std::shared_ptr<TaskQueue> lane;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return false;
    const LaneKey key{to, lane_kind};
    auto it = lanes_.find(key);
    if (it == lanes_.end()) {
      if (lanes_.size() >= limits_.max_lanes) return false;
      it = lanes_
               .emplace(key, std::make_shared<TaskQueue>("ring-send", limits_.max_pending,
                                                         limits_.max_pending_bytes))
               .first;
    }
    lane = it->second;
  }
  return lane->Post(std::move(send), bytes);  // false once the lane is stopped
}

void RingSender::Stop() {
  std::map<LaneKey, std::shared_ptr<TaskQueue>> lanes;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    lanes.swap(lanes_);
  }
  for (auto& [to, lane] : lanes) lane->Stop();
}

size_t RingSender::pending() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [to, lane] : lanes_) n += lane->pending();
  return n;
}

}  // namespace ringlm
