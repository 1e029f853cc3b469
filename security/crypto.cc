#include "security/crypto.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace ringlm {
namespace {

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "ringlm: fatal: OpenSSL %s failed\n", what);
  std::abort();
}

const unsigned char* Bytes(std::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

}  // namespace

std::string Sha256(std::string_view data) {
  std::string out(kSha256Bytes, '\0');
  SHA256(Bytes(data), data.size(), reinterpret_cast<unsigned char*>(out.data()));
  return out;
}

std::string HmacSha256(std::string_view key, std::string_view data) {
  std::string out(kSha256Bytes, '\0');
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), Bytes(data), data.size(),
           reinterpret_cast<unsigned char*>(out.data()), &len) == nullptr ||
      len != kSha256Bytes) {
    Die("HMAC");
  }
  return out;
}

std::string HkdfSha256(std::string_view key, std::string_view info, size_t length) {
  std::unique_ptr<EVP_PKEY_CTX, decltype(&EVP_PKEY_CTX_free)> ctx(
      EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr), EVP_PKEY_CTX_free);
  std::string out(length, '\0');
  size_t out_len = length;
  // An empty key is legal for HKDF (the insecure mode's fixed key), but
  // OpenSSL refuses a zero-length one, so key it with one zero byte then.
  const std::string_view ikm = key.empty() ? std::string_view("\0", 1) : key;
  if (ctx == nullptr || EVP_PKEY_derive_init(ctx.get()) <= 0 ||
      EVP_PKEY_CTX_set_hkdf_md(ctx.get(), EVP_sha256()) <= 0 ||
      EVP_PKEY_CTX_set1_hkdf_key(ctx.get(), Bytes(ikm), static_cast<int>(ikm.size())) <= 0 ||
      EVP_PKEY_CTX_add1_hkdf_info(ctx.get(), Bytes(info), static_cast<int>(info.size())) <= 0 ||
      EVP_PKEY_derive(ctx.get(), reinterpret_cast<unsigned char*>(out.data()), &out_len) <= 0 ||
      out_len != length) {
    Die("HKDF");
  }
  return out;
}

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  return a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1) {
    Die("RAND_bytes");
  }
  return out;
}

std::string HexEncode(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string RandomId(std::string_view prefix) {
  return std::string(prefix) + HexEncode(RandomBytes(16));
}

}  // namespace ringlm
