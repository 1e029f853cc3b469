#include "inference/token_digest.h"

#include <openssl/evp.h>

namespace ringlm {

std::string TokenDigest(std::span<const int32_t> tokens) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  unsigned char le[4 * 256];
  size_t fill = 0;
  for (int32_t t : tokens) {
    const uint32_t u = static_cast<uint32_t>(t);
    le[fill++] = static_cast<unsigned char>(u);
    le[fill++] = static_cast<unsigned char>(u >> 8);
    le[fill++] = static_cast<unsigned char>(u >> 16);
    le[fill++] = static_cast<unsigned char>(u >> 24);
    if (fill == sizeof(le)) {
      EVP_DigestUpdate(ctx, le, fill);
      fill = 0;
    }
  }
  EVP_DigestUpdate(ctx, le, fill);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_DigestFinal_ex(ctx, out, &size);
  EVP_MD_CTX_free(ctx);
  return std::string(reinterpret_cast<const char*>(out), size);
}

}  // namespace ringlm
