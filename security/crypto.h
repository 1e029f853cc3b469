// Small, fixed cryptographic primitives that the rest of ringlm builds on:
// HMAC-SHA256, HKDF-SHA256, SHA-256, constant-time comparison and CSPRNG
// bytes, all from OpenSSL. Everything here is a pure function of its
// arguments (except the random ones) and thread-safe.
#ifndef RINGLM_SECURITY_CRYPTO_H_
#define RINGLM_SECURITY_CRYPTO_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace ringlm {

inline constexpr size_t kSha256Bytes = 32;

// SHA-256 of `data`: 32 raw bytes.
std::string Sha256(std::string_view data);

// HMAC-SHA256 of `data` under `key`: 32 raw bytes.
std::string HmacSha256(std::string_view key, std::string_view data);

// HKDF-SHA256 (RFC 5869) with an empty salt: `length` bytes derived from
// `key` for the purpose named by `info`. Distinct `info` strings give
// independent keys. Precondition: 1 <= length <= 255 * 32.
std::string HkdfSha256(std::string_view key, std::string_view info, size_t length = kSha256Bytes);

// True when a and b have the same length and bytes; the time taken does not
// depend on where they differ.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// `n` bytes from OpenSSL's CSPRNG. Aborts if the CSPRNG fails (it cannot
// on Linux once seeded; continuing with weak ids would be worse).
std::string RandomBytes(size_t n);

// A random id: `prefix` then 32 lowercase hex digits (128 bits).
std::string RandomId(std::string_view prefix);

// Lowercase hex of `bytes`.
std::string HexEncode(std::string_view bytes);

}  // namespace ringlm

#endif  // RINGLM_SECURITY_CRYPTO_H_
