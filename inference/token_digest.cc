#include "inference/token_digest.h"

#include <openssl/evp.h>

namespace ringlm {

struct TokenDigester::Context {
  Context() : md(EVP_MD_CTX_new()) { EVP_DigestInit_ex(md, EVP_sha256(), nullptr); }
  ~Context() { EVP_MD_CTX_free(md); }
  EVP_MD_CTX* md;
};

TokenDigester::TokenDigester() : ctx_(std::make_unique<Context>()) {}
TokenDigester::~TokenDigester() = default;

void TokenDigester::Add(std::span<const int32_t> tokens) {
  unsigned char le[4 * 256];
  size_t fill = 0;
  for (int32_t t : tokens) {
    const uint32_t u = static_cast<uint32_t>(t);
    le[fill++] = static_cast<unsigned char>(u);
    le[fill++] = static_cast<unsigned char>(u >> 8);
    le[fill++] = static_cast<unsigned char>(u >> 16);
    le[fill++] = static_cast<unsigned char>(u >> 24);
    if (fill == sizeof(le)) {
      EVP_DigestUpdate(ctx_->md, le, fill);
      fill = 0;
    }
  }
  EVP_DigestUpdate(ctx_->md, le, fill);
}

std::string TokenDigester::Digest() const {
  // Finalizes a copy, so the sequence can go on growing.
  EVP_MD_CTX* copy = EVP_MD_CTX_new();
  EVP_MD_CTX_copy_ex(copy, ctx_->md);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(copy, out, &size);
  EVP_MD_CTX_free(copy);
  return std::string(reinterpret_cast<const char*>(out), size);
}

std::string TokenDigest(std::span<const int32_t> tokens) {
  TokenDigester digester;
  digester.Add(tokens);
  return digester.Digest();
}

}  // namespace ringlm
