#include "tests/chat_client.h"

#include <httplib.h>

#include "absl/strings/str_cat.h"

namespace ringlm::testing {

using nlohmann::json;

ChatReply Chat(uint16_t port, const json& messages, int max_tokens, const json& sampling) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  json body = {{"messages", messages}, {"max_tokens", max_tokens}};
  body.update(sampling);
  auto res = client.Post("/v1/chat/completions", body.dump(), "application/json");
  ChatReply r;
  if (!res) return r;
  r.status = res->status;
  const json out = json::parse(res->body, nullptr, false);
  if (res->status != 200 || !out.is_object()) {
    r.content = res->body;
    return r;
  }
  r.content = out["choices"][0]["message"]["content"];
  r.cached = out["usage"]["prompt_tokens_details"]["cached_tokens"];
  r.prompt_tokens = out["usage"]["prompt_tokens"];
  r.completion_tokens = out["usage"]["completion_tokens"];
  return r;
}

std::string StoryText(int words, int seed) {
  static const char* kWords[] = {"the", "little", "cat",   "saw", "a",    "big",  "tree", "and",
                                 "she", "was",    "happy", "to",  "play", "with", "her",  "ball",
                                 "in",  "park",   "one",   "day", "Lily", "went", "sun",  "dog"};
  std::string out;
  uint32_t x = 2654435761u * static_cast<uint32_t>(seed + 1);
  for (int i = 0; i < words; ++i) {
    x = x * 1664525u + 1013904223u;
    absl::StrAppend(&out, i == 0 ? "" : " ", kWords[(x >> 16) % std::size(kWords)]);
    if (i % 9 == 8) out += ".";
  }
  return out + ".";
}

}  // namespace ringlm::testing
