// Text <-> token ids for GGUF models, token-identical to llama.cpp (build 4748).
//
// The vocabulary arrives as a plain `Vocabulary` (filled from GGUF metadata by
// the GGUF reader). `Tokenizer::Create` validates it and picks the algorithm
// named by `Vocabulary::model`: "llama" (SentencePiece BPE with byte fallback,
// llama.cpp's LLAMA_VOCAB_TYPE_SPM) or "gpt2" (byte-level BPE with merges and
// a regex-style pre-tokenizer, LLAMA_VOCAB_TYPE_BPE, as in Llama 3 and Qwen 2).

#ifndef RINGLM_INFERENCE_TOKENIZER_TOKENIZER_H_
#define RINGLM_INFERENCE_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringlm {

// GGUF `tokenizer.ggml.token_type` values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// A tokenizer vocabulary as stored in GGUF metadata.
struct Vocabulary {
  // tokenizer.ggml.model: "llama" or "gpt2".
  std::string model = "llama";
  // tokenizer.ggml.tokens. "llama": U+2581 marks a space, byte pieces are
  // "<0xNN>". "gpt2": normal pieces are byte-level (each byte written as the
  // code point GPT-2's bytes_to_unicode gives it, e.g. ' ' as U+0120 "Ġ");
  // control and user-defined pieces are plain text.
  std::vector<std::string> pieces;
  // "gpt2" only: tokenizer.ggml.merges, "left right" in rank order (earlier
  // merges apply first); both sides must be pieces.
  std::vector<std::string> merges;
  // "gpt2" only: tokenizer.ggml.pre, which picks the pre-tokenizer split
  // (see BpeDefaultAddBos for the supported names).
  std::string pre;
  // tokenizer.ggml.scores; empty means "all 0" (as llama.cpp when the key is absent).
  std::vector<float> scores;
  // tokenizer.ggml.token_type; empty means "all kNormal" (as llama.cpp).
  std::vector<TokenType> types;
  // Special token ids; -1 means none. The GGUF reader applies llama.cpp's
  // defaults (bos 1, eos 2, unk 0 for "llama"; bos = eos = 11 for "gpt2")
  // when the keys are absent. eot/eom (end of turn / message) only widen
  // IsEndOfGeneration.
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  int32_t pad_id = -1;
  int32_t eot_id = -1;
  int32_t eom_id = -1;
  // tokenizer.ggml.add_bos_token / add_eos_token / add_space_prefix. (The
  // GGUF reader's defaults for "gpt2": add_bos per BpeDefaultAddBos,
  // add_space_prefix false.)
  bool add_bos = true;
  bool add_eos = false;
  bool add_space_prefix = true;
};

namespace tokenizer_internal {
class VocabIndex;
struct Fragment;
}  // namespace tokenizer_internal

// One run of a prompt for Tokenizer::EncodeSegments.
struct PromptSegment {
  std::string text;
  // True for text the server wrote itself (a chat template's role and turn
  // markers): special-token texts inside become their control tokens. False
  // for text a client sent (message content): they stay plain text.
  bool is_control = false;
  // Not empty: the segment is these token ids, verbatim, and is not
  // tokenized (`text` is what they decode to, for JoinSegments; is_control
  // is ignored). The caller vouches that they are valid ids.
  std::vector<int32_t> ids = {};

  bool operator==(const PromptSegment&) const = default;
};

// Converts between text and token ids for one vocabulary.
//
// Contract:
// - Created only through `Create`, which validates the vocabulary and owns a
//   copy of it. Immutable afterwards, hence thread-safe: any number of threads
//   may call any const method concurrently.
// - Never crashes on input: any byte string can be encoded (invalid UTF-8
//   falls back to byte tokens), and invalid ids decode to "".
// - Subclasses implement one tokenizer model (`SpmTokenizer` for "llama");
//   users hold a `Tokenizer`.
class Tokenizer {
 public:
  // Validates `vocab` and builds the tokenizer for `vocab.model`.
  // Errors: InvalidArgument for a malformed vocabulary (sizes disagree, ids out
  // of range, duplicate pieces, bad byte pieces, for "llama" a byte that can be
  // neither byte-encoded nor mapped to unk, for "gpt2" a malformed merge or one
  // naming an unknown piece, add_bos without bos, ...); Unimplemented for a
  // known llama.cpp model type other than "llama" and "gpt2", or a "gpt2"
  // pre-tokenizer that is not implemented.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(Vocabulary vocab);

  virtual ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Tokenizes `text` (arbitrary bytes) like llama.cpp's llama_tokenize.
  // add_special: prepend BOS / append EOS as the vocabulary's add_bos/add_eos say.
  // parse_special: texts of control and unknown tokens inside `text` (e.g. "<s>")
  // become those tokens. User-defined tokens are always matched, as in llama.cpp.
  std::vector<int32_t> Encode(std::string_view text, bool add_special, bool parse_special) const;

  // Tokenizes the concatenation of `segments` as Encode(joined, add_special,
  // /*parse_special=*/true) does, except that a control or unknown token's
  // text becomes that token only where it lies wholly inside control segments
  // (is_control); text that overlaps a content segment by even one byte stays
  // plain text (as Encode with parse_special=false would tokenize it).
  // User-defined tokens are matched everywhere, as in Encode. Segments are
  // joined before tokenizing, so when no content holds special-token text
  // the ids equal Encode(joined, add_special, true): splitting a prompt into
  // segments never changes how ordinary text is tokenized.
  //
  // Segments with `ids` cut the prompt into runs of text, each tokenized on
  // its own as above, with the ids placed verbatim between them. BOS (with
  // add_special) comes before the first run and EOS after the last, even
  // when those runs are empty. A run after ids continues text: for a
  // SentencePiece vocabulary (add_space_prefix) its first fragment gets no
  // dummy-prefix space, as when it is tokenized in one piece with the text
  // before it. Without ids segments there is a single run, as before.
  std::vector<int32_t> EncodeSegments(std::span<const PromptSegment> segments,
                                      bool add_special) const;

  // The bytes token `id` contributes to output, like llama_token_to_piece with
  // special=false: control and unknown tokens give "", user-defined tokens
  // their text. "llama": byte tokens give their byte, normal tokens their text
  // with U+2581 turned into ' '. "gpt2": normal tokens give the bytes their
  // byte-level code points stand for (a code point that stands for no byte
  // gives llama.cpp's "[UNK_BYTE_0x..]" text), other types "". Invalid ids give "".
  virtual std::string TokenToPiece(int32_t id) const = 0;

  // Like llama_detokenize(remove_special=false, unparse_special=false): the
  // concatenated pieces, except that when add_space_prefix is set one leading
  // ' ' is dropped from the FIRST token's piece. A leading BOS (piece "")
  // uses up that rule, so Decode(Encode("Hi", /*add_special=*/true, ...)) is
  // " Hi" while Decode(Encode("Hi", false, ...)) is "Hi". Invalid ids are
  // skipped. The result is raw bytes and may be invalid UTF-8; use
  // StreamingDecoder for display text. For "gpt2" with a pre-tokenizer where
  // llama.cpp sets clean_spaces (all but the qwen2 family), llama.cpp's three
  // clean-up passes then run: " ?", " !", " .", " ," lose the space, " ' "
  // becomes "'", and " 's", " 'm", " 're", " 've" lose the space.
  std::string Decode(std::span<const int32_t> ids) const;

  int32_t n_vocab() const;
  int32_t bos_id() const;  // -1 if none
  int32_t eos_id() const;  // -1 if none

  // True for EOS, eot_id, eom_id and for the end-of-turn tokens llama.cpp recognizes by text
  // ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
  // "<|eom_id|>", "<EOT>", ...).
  bool IsEndOfGeneration(int32_t id) const;
  bool IsValid(int32_t id) const;  // 0 <= id < n_vocab()

  // The vocabulary as normalized by Create (empty pieces renamed
  // "[EMPTY_<id>]", absent scores/types filled in).
  const Vocabulary& vocabulary() const;

 protected:
  // clean_spaces: Decode applies llama.cpp's detokenizer clean-up passes.
  explicit Tokenizer(std::unique_ptr<const tokenizer_internal::VocabIndex> index,
                     bool clean_spaces = false);
  const tokenizer_internal::VocabIndex& index() const { return *index_; }
  // Where a run of text sits in its prompt, for EncodeFragments.
  struct RunPosition {
    bool add_bos = false;  // first: BOS before it, when the vocabulary's add_bos says so
    bool add_eos = false;  // last: EOS after it, when add_eos says so
    // After other tokens of the same text: no SentencePiece dummy-prefix
    // space before its first raw fragment.
    bool continues = false;
  };
  // The tokens of `text` already split by PartitionSpecialTokens (raw
  // fragments are views into `text`).
  virtual std::vector<int32_t> EncodeFragments(
      std::string_view text, std::span<const tokenizer_internal::Fragment> fragments,
      RunPosition position) const = 0;

 private:
  // One run of EncodeSegments: `segments` hold no ids.
  std::vector<int32_t> EncodeRun(std::span<const PromptSegment> segments,
                                 RunPosition position) const;
  std::unique_ptr<const tokenizer_internal::VocabIndex> index_;
  bool clean_spaces_;
};

// For a "gpt2" vocabulary: llama.cpp's add_bos when tokenizer.ggml.add_bos_token
// is absent, for tokenizer.ggml.pre = `pre` (true for the llama3 family, false
// otherwise). Unimplemented for a pre-tokenizer Tokenizer::Create does not
// support. Supported: llama3, llama-v3, llama-bpe, falcon3 (Llama 3 split);
// qwen2, deepseek-r1-qwen, stablelm2, megrez (Qwen 2 split); gpt-2, phi-2,
// mpt, olmo, jais, jina-es, jina-de, jina-v2-es, jina-v2-de, gigachat (GPT-2).
absl::StatusOr<bool> BpeDefaultAddBos(std::string_view pre);

// Checks "gpt2" merges as Tokenizer::Create does: each must split at its first
// ' ' after position 0 into two non-empty pieces of `pieces`. InvalidArgument
// naming the first bad merge by index.
absl::Status CheckBpeMerges(std::span<const std::string> pieces,
                            std::span<const std::string> merges);

// Turns a stream of token ids into text, emitting only complete UTF-8
// sequences, so a character whose bytes are split across byte-fallback tokens
// comes out whole.
//
// Contract:
// - Holds a reference to `tokenizer`, which must outlive it.
// - Not thread-safe (one decoder per generation stream).
// - Pieces are TokenToPiece(id) concatenated, with no leading-space stripping
//   (like llama.cpp's streaming output of generated tokens).
// - Output is always valid UTF-8: each maximal ill-formed subsequence (Unicode
//   "substitution of maximal subparts") becomes one U+FFFD. A trailing
//   incomplete-but-so-far-valid sequence is held back until more bytes arrive;
//   Flush() emits it as U+FFFD and resets the decoder.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const Tokenizer& tokenizer);

  // Appends token `id`'s piece; returns the text that is now complete.
  std::string Push(int32_t id);
  // Returns whatever is held back (as U+FFFD) and clears the buffer.
  std::string Flush();

 private:
  const Tokenizer& tokenizer_;
  std::string pending_;  // bytes of an incomplete UTF-8 sequence, at most 3
};

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_TOKENIZER_TOKENIZER_H_
