// A chat prompt in which the assistant replies this server generated keep
// the token ids the model generated for them (ReplyStore), so that turn N+1's
// ids start with exactly turn N's prompt ids followed by its reply's ids.
#ifndef RINGLM_CHAT_REPLY_SPLICE_H_
#define RINGLM_CHAT_REPLY_SPLICE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "chat/chat_renderer.h"
#include "chat/chat_template.h"
#include "chat/reply_store.h"
#include "chat/tool_definition.h"
#include "inference/tokenizer/tokenizer.h"

namespace ringlm {

// renderer.Render(messages, tools), except that where an assistant message's
// content is byte-equal to a reply in `replies`, and the template writes it
// verbatim, that span is a PromptSegment carrying the reply's ids
// (Tokenizer::EncodeSegments then tokenizes the text before it as its own run
// and the text after it as a continuation).
//
// How "writes it verbatim" is checked, for any template: each such content
// is replaced by a placeholder (its leading and trailing ASCII whitespace
// kept, around private-use code points U+F0000 / U+F0001 and an index) and
// the messages rendered again. The spans are used only when putting each
// content back in place of its placeholder gives, byte for byte and run for
// run (control or content), the normal rendering. Otherwise (a template that
// trims, rewrites or drops-and-rebuilds the content, such as Qwen3 cutting
// <think>; a normal rendering that holds those code points already; the
// second render failing) the result is the normal rendering, unchanged.
//
// Errors: those of renderer.Render on `messages`. Thread-safe as its parts.
absl::StatusOr<std::vector<PromptSegment>> RenderWithReplyIds(
    const ChatRenderer& renderer, const std::vector<ChatMessage>& messages,
    const std::vector<ToolDefinition>& tools, ReplyStore& replies);

}  // namespace ringlm

#endif  // RINGLM_CHAT_REPLY_SPLICE_H_
