#include "chat/chat_template.h"

#include <cctype>
#include <string>
#include <utility>
#include <vector>

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

// Collects the rendering as alternating control / content runs.
class SegmentWriter {
 public:
  // Template text: markers, role names, separators.
  SegmentWriter& Control(std::string_view text) { return Append(text, true); }
  // A message's content, as the client sent it.
  SegmentWriter& Content(std::string_view text) { return Append(text, false); }
  std::vector<PromptSegment> Take() { return std::move(segments_); }

 private:
  SegmentWriter& Append(std::string_view text, bool is_control) {
    if (text.empty()) return *this;
    if (segments_.empty() || segments_.back().is_control != is_control) {
      segments_.push_back(PromptSegment{std::string(), is_control});
    }
    segments_.back().text.append(text);
    return *this;
  }

  std::vector<PromptSegment> segments_;
};

// llama.cpp's LLAMA_2 / LLAMA_2_SYS: the conversation opens inside a turn, BOS
// is left to the tokenizer, a system message is wrapped in <<SYS>> only when
// the template supports it, and the user turn ends with the assistant's cue.
void RenderLlama2(const std::vector<ChatMessage>& messages, bool support_system,
                  SegmentWriter& out) {
  out.Control("[INST] ");
  bool inside_turn = true;
  for (const ChatMessage& m : messages) {
    if (!inside_turn) {
      inside_turn = true;
      out.Control("[INST] ");
    }
    if (m.role == "system") {
      if (support_system) {
        out.Control("<<SYS>>\n").Content(m.content).Control("\n<</SYS>>\n\n");
      } else {
        out.Content(m.content).Control("\n");
      }
    } else if (m.role == "user") {
      out.Content(m.content).Control(" [/INST]");
    } else {
      out.Content(m.content).Control("</s>");
      inside_turn = false;
    }
  }
}

void RenderPlain(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                 SegmentWriter& out) {
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      out.Content(m.content).Control("\n\n");
    } else if (m.role == "user") {
      out.Control("User: ").Content(m.content).Control("\n");
    } else {
      const bool leading_space =
          !m.content.empty() && std::isspace(static_cast<unsigned char>(m.content[0]));
      out.Control(leading_space ? "Assistant:" : "Assistant: ").Content(m.content).Control("\n");
    }
  }
  if (add_generation_prompt) out.Control("Assistant:");
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

absl::StatusOr<ChatFormat> ParseFormatName(std::string_view name) {
  for (ChatFormat f : {ChatFormat::kLlama2, ChatFormat::kLlama3, ChatFormat::kChatML,
                       ChatFormat::kMistral, ChatFormat::kZephyr, ChatFormat::kPlain}) {
    if (FormatName(f) == name) return f;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown chat format '", std::string(name),
                   "' (built-in: llama2, llama3, chatml, mistral, zephyr, plain)"));
}

absl::StatusOr<std::vector<PromptSegment>> RenderChatSegments(
    ChatFormat format, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  if (messages.empty()) return absl::InvalidArgumentError("no messages to render");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      return absl::InvalidArgumentError(absl::StrCat("messages[", i, "]: role '", role,
                                                     "' needs a chat template with tool support"));
    }
    if (!messages[i].tool_calls.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("messages[", i, "]: tool calls need a chat template with tool support"));
    }
  }
  SegmentWriter out;
  switch (format) {
    case ChatFormat::kLlama2:
      RenderLlama2(messages, /*support_system=*/true, out);
      return out.Take();
    case ChatFormat::kMistral:
      RenderLlama2(messages, /*support_system=*/false, out);
      return out.Take();
    case ChatFormat::kLlama3:
      for (const ChatMessage& m : messages) {
        out.Control(absl::StrCat("<|start_header_id|>", m.role, "<|end_header_id|>\n\n"))
            .Content(Trim(m.content))
            .Control("<|eot_id|>");
      }
      if (add_generation_prompt) out.Control("<|start_header_id|>assistant<|end_header_id|>\n\n");
      return out.Take();
    case ChatFormat::kChatML:
      for (const ChatMessage& m : messages) {
        out.Control(absl::StrCat("<|im_start|>", m.role, "\n"))
            .Content(m.content)
            .Control("<|im_end|>\n");
      }
      if (add_generation_prompt) out.Control("<|im_start|>assistant\n");
      return out.Take();
    case ChatFormat::kZephyr:
      for (const ChatMessage& m : messages) {
        out.Control(absl::StrCat("<|", m.role, "|>\n"))
            .Content(m.content)
            .Control("<|endoftext|>\n");
      }
      if (add_generation_prompt) out.Control("<|assistant|>\n");
      return out.Take();
    case ChatFormat::kPlain:
      RenderPlain(messages, add_generation_prompt, out);
      return out.Take();
  }
  return absl::InternalError("unknown chat format");
}

std::string JoinSegments(const std::vector<PromptSegment>& segments) {
  std::string out;
  for (const PromptSegment& segment : segments) out += segment.text;
  return out;
}

absl::StatusOr<std::string> RenderChat(ChatFormat format, const std::vector<ChatMessage>& messages,
                                       bool add_generation_prompt) {
  absl::StatusOr<std::vector<PromptSegment>> segments =
      RenderChatSegments(format, messages, add_generation_prompt);
  if (!segments.ok()) return segments.status();
  return JoinSegments(*segments);
}

}  // namespace ringlm
