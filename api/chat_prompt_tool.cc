// chat_prompt_tool MODEL.gguf REQUESTS.json: the prompt the API would build
// for each chat request of REQUESTS (a JSON array of request bodies: messages,
// tools, ...), through the same code as the server: the request parser, the
// model's chat template (ChatRenderer) and the tokenizer's EncodeSegments.
// Prints one JSON array: per request {"text": the rendered prompt (BOS text
// dropped as the server drops it), "ids": [...]} or {"error": "..."}. For
// tests/chat_prompts/check.py, which compares both with jinja2 and Hugging
// Face's tokenizer on real vocabularies.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "api/completion_request.h"
#include "chat/chat_renderer.h"
#include "gguf/gguf_file.h"
#include "inference/vocabulary_loader.h"
#include "nlohmann/json.hpp"

namespace {

int Fail(const std::string& what) {
  std::fprintf(stderr, "chat_prompt_tool: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using ringlm::PromptSegment;
  if (argc != 3) {
    std::fprintf(stderr, "usage: chat_prompt_tool MODEL.gguf REQUESTS.json\n");
    return 2;
  }
  auto file = ringlm::GgufFile::Open(argv[1]);
  if (!file.ok()) return Fail(file.status().ToString());
  auto vocab = ringlm::LoadVocabulary(**file);
  if (!vocab.ok()) return Fail(vocab.status().ToString());
  auto tokenizer = ringlm::Tokenizer::Create(*std::move(vocab));
  if (!tokenizer.ok()) return Fail(tokenizer.status().ToString());
  auto chat_template = (*file)->GetString("tokenizer.chat_template");
  auto renderer =
      ringlm::ChatRenderer::Create(chat_template.ok() ? *chat_template : "", {}, **tokenizer);
  if (!renderer.ok()) return Fail(renderer.status().ToString());
  if (!renderer->warning().empty()) return Fail(renderer->warning());

  std::ifstream in(argv[2], std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::ordered_json requests = nlohmann::ordered_json::parse(text, nullptr, false);
  if (!requests.is_array()) return Fail(std::string(argv[2]) + ": not a JSON array");
  nlohmann::json out = nlohmann::json::array();
  for (const nlohmann::ordered_json& body : requests) {
    auto request = ringlm::ParseChatCompletionRequest(body.dump());
    if (!request.ok()) {
      out.push_back({{"error", request.status().ToString()}});
      continue;
    }
    auto segments = renderer->Render(request->messages, request->tools);
    if (!segments.ok()) {
      out.push_back({{"error", segments.status().ToString()}});
      continue;
    }
    out.push_back({{"text", ringlm::JoinSegments(*segments)},
                   {"ids", (*tokenizer)->EncodeSegments(*segments, /*add_special=*/true)}});
  }
  std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}
