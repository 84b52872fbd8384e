// SPDX-License-Identifier: Apache-2.0
#include "conflux/protocol/admin_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <charconv>

namespace conflux::proto {
namespace {

std::string hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    s[2 * i] = kDigits[p[i] >> 4];
    s[2 * i + 1] = kDigits[p[i] & 15];
  }
  return s;
}

// Hex HMAC-SHA256 of the signed string, "" when libcrypto fails.
std::string mac_hex(std::string_view secret, std::string_view path, int64_t unix_s) {
  const std::string msg = "conflux admin v1 " + std::string(path) + " " + std::to_string(unix_s);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), md, &len) == nullptr) {
    return "";
  }
  return hex(md, len);
}

}  // namespace

std::string admin_auth_value(std::string_view secret, std::string_view path, int64_t unix_s) {
  return std::to_string(unix_s) + " " + mac_hex(secret, path, unix_s);
}

conflux::Status admin_auth_check(std::string_view secret, std::string_view path,
                                 std::string_view value, int64_t now_s) {
  const size_t space = value.find(' ');
  int64_t ts = 0;
  if (space == std::string_view::npos ||
      std::from_chars(value.data(), value.data() + space, ts).ptr != value.data() + space) {
    return invalid_argument("malformed " + std::string(kAdminAuthHeader) + " header");
  }
  if (ts < now_s - kAdminMaxSkewS || ts > now_s + kAdminMaxSkewS) {
    return invalid_argument("the request's time is more than " + std::to_string(kAdminMaxSkewS) +
                            " s from the daemon's clock");
  }
  const std::string want = mac_hex(secret, path, ts);
  const std::string_view got = value.substr(space + 1);
  if (want.empty() || got.size() != want.size() ||
      CRYPTO_memcmp(got.data(), want.data(), want.size()) != 0) {
    return invalid_argument("wrong secret");
  }
  return {};
}

}  // namespace conflux::proto
