// A non-streaming chat completion against a test cluster's head, with the
// usage figures the prefix-cache tests check.
#ifndef RINGLM_TESTS_CHAT_CLIENT_H_
#define RINGLM_TESTS_CHAT_CLIENT_H_

#include <cstdint>
#include <string>

#include "nlohmann/json.hpp"

namespace ringlm::testing {

// The reply to one request. status 0: no HTTP answer. On a status other than
// 200, `content` holds the body and the counts stay -1.
struct ChatReply {
  int status = 0;
  std::string content;
  int cached = -1;  // usage.prompt_tokens_details.cached_tokens
  int prompt_tokens = -1;
  int completion_tokens = -1;
};

// POST /v1/chat/completions on 127.0.0.1:`port` with `messages` and
// `max_tokens`; `sampling` (fields merged into the body) replaces the greedy
// default {"temperature": 0}. Waits up to 60 s.
ChatReply Chat(uint16_t port, const nlohmann::json& messages, int max_tokens,
               const nlohmann::json& sampling = {{"temperature", 0}});

// `words` words of story sentences; a different `seed` gives a different
// text.
std::string StoryText(int words, int seed);

}  // namespace ringlm::testing

#endif  // RINGLM_TESTS_CHAT_CLIENT_H_
