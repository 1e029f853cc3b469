#include "inference/chat_template.h"

#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ringlm {
namespace {

bool Contains(std::string_view haystack, std::string_view needle) {
  return haystack.find(needle) != std::string_view::npos;
}

// Like llama.cpp's trim(): ASCII whitespace off both ends.
std::string Trim(std::string_view s) {
  size_t begin = 0;
  size_t end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return std::string(s.substr(begin, end - begin));
}

// llama.cpp's LLAMA_2 / LLAMA_2_SYS: the conversation opens inside a turn, BOS
// is left to the tokenizer, a system message is wrapped in <<SYS>> only when
// the template supports it, and the user turn ends with the assistant's cue.
std::string RenderLlama2(const std::vector<ChatMessage>& messages, bool support_system) {
  std::string out = "[INST] ";
  bool inside_turn = true;
  for (const ChatMessage& m : messages) {
    if (!inside_turn) {
      inside_turn = true;
      out += "[INST] ";
    }
    if (m.role == "system") {
      if (support_system) {
        absl::StrAppend(&out, "<<SYS>>\n", m.content, "\n<</SYS>>\n\n");
      } else {
        absl::StrAppend(&out, m.content, "\n");
      }
    } else if (m.role == "user") {
      absl::StrAppend(&out, m.content, " [/INST]");
    } else {
      absl::StrAppend(&out, m.content, "</s>");
      inside_turn = false;
    }
  }
  return out;
}

std::string RenderPlain(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      absl::StrAppend(&out, m.content, "\n\n");
    } else if (m.role == "user") {
      absl::StrAppend(&out, "User: ", m.content, "\n");
    } else {
      const bool leading_space =
          !m.content.empty() && std::isspace(static_cast<unsigned char>(m.content[0]));
      absl::StrAppend(&out, leading_space ? "Assistant:" : "Assistant: ", m.content, "\n");
    }
  }
  if (add_generation_prompt) out += "Assistant:";
  return out;
}

}  // namespace

ChatFormat DetectChatFormat(std::string_view t) {
  if (Contains(t, "<|start_header_id|>")) return ChatFormat::kLlama3;
  if (Contains(t, "<|im_start|>")) return ChatFormat::kChatML;
  if (Contains(t, "[INST]")) {
    return Contains(t, "<<SYS>>") ? ChatFormat::kLlama2 : ChatFormat::kMistral;
  }
  if (Contains(t, "<|user|>")) return ChatFormat::kZephyr;
  return ChatFormat::kPlain;
}

std::string FormatName(ChatFormat format) {
  switch (format) {
    case ChatFormat::kLlama2:
      return "llama2";
    case ChatFormat::kLlama3:
      return "llama3";
    case ChatFormat::kChatML:
      return "chatml";
    case ChatFormat::kMistral:
      return "mistral";
    case ChatFormat::kZephyr:
      return "zephyr";
    case ChatFormat::kPlain:
      return "plain";
  }
  return "plain";
}

absl::StatusOr<std::string> RenderChat(ChatFormat format, const std::vector<ChatMessage>& messages,
                                       bool add_generation_prompt) {
  if (messages.empty()) return absl::InvalidArgumentError("no messages to render");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      return absl::InvalidArgumentError(
          absl::StrCat("messages[", i, "]: unsupported role '", role, "'"));
    }
  }
  std::string out;
  switch (format) {
    case ChatFormat::kLlama2:
      return RenderLlama2(messages, /*support_system=*/true);
    case ChatFormat::kMistral:
      return RenderLlama2(messages, /*support_system=*/false);
    case ChatFormat::kLlama3:
      for (const ChatMessage& m : messages) {
        absl::StrAppend(&out, "<|start_header_id|>", m.role, "<|end_header_id|>\n\n",
                        Trim(m.content), "<|eot_id|>");
      }
      if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      return out;
    case ChatFormat::kChatML:
      for (const ChatMessage& m : messages) {
        absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
      }
      if (add_generation_prompt) out += "<|im_start|>assistant\n";
      return out;
    case ChatFormat::kZephyr:
      for (const ChatMessage& m : messages) {
        absl::StrAppend(&out, "<|", m.role, "|>\n", m.content, "<|endoftext|>\n");
      }
      if (add_generation_prompt) out += "<|assistant|>\n";
      return out;
    case ChatFormat::kPlain:
      return RenderPlain(messages, add_generation_prompt);
  }
  return absl::InternalError("unknown chat format");
}

}  // namespace ringlm
