#include "chat/reply_splice.h"

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringlm {
namespace {

// Private-use code points (plane 15) around a placeholder's index.
constexpr char kOpenText[] = "\xF3\xB0\x80\x80";   // U+F0000
constexpr char kCloseText[] = "\xF3\xB0\x80\x81";  // U+F0001
constexpr std::string_view kOpen = kOpenText, kClose = kCloseText;
constexpr std::string_view kAsciiSpace = " \t\n\v\f\r";

// An assistant message whose content is a stored reply.
struct Candidate {
  size_t message;            // index into the messages
  std::string lead, trail;   // the content's leading / trailing ASCII whitespace
  std::vector<int32_t> ids;  // the reply's generated ids
};

std::vector<Candidate> FindCandidates(const std::vector<ChatMessage>& messages,
                                      ReplyStore& replies) {
  std::vector<Candidate> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& content = messages[i].content;
    if (messages[i].role != "assistant" || content.empty()) continue;
    std::optional<std::vector<int32_t>> ids = replies.Find(content);
    if (!ids) continue;
    const size_t begin = std::min(content.find_first_not_of(kAsciiSpace), content.size());
    const size_t end = content.find_last_not_of(kAsciiSpace) + 1;  // npos + 1 == 0
    out.push_back(
        {i, content.substr(0, begin), begin < end ? content.substr(end) : "", *std::move(ids)});
  }
  return out;
}

// Appends text, merged into the last segment when it is text of the same kind.
void AppendText(std::vector<PromptSegment>& out, std::string_view text, bool is_control) {
  if (text.empty()) return;
  if (out.empty() || !out.back().ids.empty() || out.back().is_control != is_control) {
    out.push_back({std::string(), is_control});
  }
  out.back().text.append(text);
}

// `segments` merged as AppendText does (empty ones dropped), for comparing.
std::vector<PromptSegment> Canonical(const std::vector<PromptSegment>& segments) {
  std::vector<PromptSegment> out;
  for (const PromptSegment& s : segments) AppendText(out, s.text, s.is_control);
  return out;
}

// The marked rendering split at its placeholders: `spliced` with ids
// segments in their place, `restored` with the contents put back. False when
// a placeholder is malformed or lost its whitespace.
bool Split(const std::vector<PromptSegment>& marked, const std::vector<Candidate>& candidates,
           const std::vector<ChatMessage>& messages, std::vector<PromptSegment>& spliced,
           std::vector<PromptSegment>& restored) {
  for (const PromptSegment& segment : marked) {
    const std::string_view text = segment.text;
    size_t pos = 0;
    for (size_t open = text.find(kOpen); open != std::string_view::npos;
         open = text.find(kOpen, pos)) {
      const size_t digits = open + kOpen.size();
      const size_t close = text.find(kClose, digits);
      uint32_t index = 0;
      if (close == std::string_view::npos ||
          !absl::SimpleAtoi(absl::string_view(text.data() + digits, close - digits), &index) ||
          index >= candidates.size()) {
        return false;
      }
      const Candidate& c = candidates[index];
      const size_t end = close + kClose.size();
      if (open < pos + c.lead.size() ||
          text.substr(open - c.lead.size(), c.lead.size()) != c.lead ||
          text.substr(end, c.trail.size()) != c.trail) {
        return false;
      }
      const std::string_view before = text.substr(pos, open - c.lead.size() - pos);
      const std::string& content = messages[c.message].content;
      AppendText(spliced, before, segment.is_control);
      AppendText(restored, before, segment.is_control);
      spliced.push_back({content, false, c.ids});
      AppendText(restored, content, segment.is_control);
      pos = end + c.trail.size();
    }
    AppendText(spliced, text.substr(pos), segment.is_control);
    AppendText(restored, text.substr(pos), segment.is_control);
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<PromptSegment>> RenderWithReplyIds(
    const ChatRenderer& renderer, const std::vector<ChatMessage>& messages,
    const std::vector<ToolDefinition>& tools, ReplyStore& replies) {
  absl::StatusOr<std::vector<PromptSegment>> normal = renderer.Render(messages, tools);
  if (!normal.ok()) return normal;
  const std::vector<Candidate> candidates = FindCandidates(messages, replies);
  if (candidates.empty()) return normal;
  const std::string joined = JoinSegments(*normal);
  if (joined.find(kOpen) != std::string::npos || joined.find(kClose) != std::string::npos) {
    return normal;  // the placeholders would not be unique
  }
  std::vector<ChatMessage> marked_messages = messages;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    marked_messages[c.message].content = absl::StrCat(c.lead, kOpenText, i, kCloseText, c.trail);
  }
  absl::StatusOr<std::vector<PromptSegment>> marked = renderer.Render(marked_messages, tools);
  if (!marked.ok()) return normal;
  std::vector<PromptSegment> spliced, restored;
  if (!Split(*marked, candidates, messages, spliced, restored) || restored != Canonical(*normal)) {
    return normal;
  }
  return spliced;
}

}  // namespace ringlm
