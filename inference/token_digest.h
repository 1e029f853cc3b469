// A digest of a token sequence, so a stage can prove it holds exactly the
// prefix the head claims before reusing its KV cache.
#ifndef RINGLM_INFERENCE_TOKEN_DIGEST_H_
#define RINGLM_INFERENCE_TOKEN_DIGEST_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace ringlm {

// SHA-256 (32 raw bytes) over the ids as little-endian int32. A collision
// would need a SHA-256 collision, so a mismatched prefix is not "unlikely"
// to pass but infeasible to construct.
std::string TokenDigest(std::span<const int32_t> tokens);

// TokenDigest of a growing sequence, read at several lengths in one pass:
// after Add of a sequence's first n tokens (in any number of calls),
// Digest() equals TokenDigest of those n tokens. Not thread-safe.
class TokenDigester {
 public:
  TokenDigester();
  ~TokenDigester();
  TokenDigester(const TokenDigester&) = delete;
  TokenDigester& operator=(const TokenDigester&) = delete;

  void Add(std::span<const int32_t> tokens);
  std::string Digest() const;

 private:
  struct Context;
  std::unique_ptr<Context> ctx_;
};

}  // namespace ringlm

#endif  // RINGLM_INFERENCE_TOKEN_DIGEST_H_
