// Fixed inputs shared by the fuzz targets and fuzz_seed_gen, so that the
// committed seeds are valid for the targets that read them: the announcement
// MAC key, and step limits shaped like the bundled stories260K model.
#ifndef RINGLM_FUZZ_FUZZ_CONSTANTS_H_
#define RINGLM_FUZZ_FUZZ_CONSTANTS_H_

#include <cstdint>
#include <string_view>

namespace ringlm::fuzz {

// 32 bytes (kAnnouncementMacKeyBytes). Seeds in corpus/announcement_fuzzer
// are signed with it; change it and regenerate them.
inline constexpr std::string_view kMacKey = "ringlm-fuzz-announcement-mac-key";
static_assert(kMacKey.size() == 32);

// The node a fuzzed StageStep arrives at, running stories260K: 5 layers,
// n_embd 64, 512 tokens, context 512, prompt chunks of up to 512 tokens.
inline constexpr std::string_view kSelfId = "node-b";
inline constexpr std::string_view kModelFingerprint = "stories260K-f32";
inline constexpr uint32_t kNLayer = 5;
inline constexpr uint32_t kNEmbd = 64;
inline constexpr uint32_t kNVocab = 512;
inline constexpr uint32_t kContextSize = 512;
inline constexpr uint32_t kMaxStepTokens = 512;

}  // namespace ringlm::fuzz

#endif  // RINGLM_FUZZ_FUZZ_CONSTANTS_H_
