// SPDX-License-Identifier: Apache-2.0
#include "conflux/protocol/data_mac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>

#include "conflux/protocol/byteorder.h"

namespace conflux::proto {

namespace {
constexpr size_t kIvSize = 12;
constexpr size_t kTagSize = 16;
static_assert(kIvSize + kTagSize == kMacTrailerSize);
constexpr char kLabel[] = "conflux data mac v1";
}  // namespace

DataKey derive_data_key(std::string_view secret, uint32_t job_id, uint64_t job_token) {
  uint8_t msg[sizeof kLabel - 1 + 4 + 8];
  std::memcpy(msg, kLabel, sizeof kLabel - 1);
  store_be<uint32_t>(msg + sizeof kLabel - 1, job_id);
  store_be<uint64_t>(msg + sizeof kLabel + 3, job_token);
  uint8_t md[EVP_MAX_MD_SIZE];
  unsigned md_len = 0;
  DataKey k{};
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), msg, sizeof msg, md,
           &md_len) == nullptr) {
    return k;  // an all-zero key is refused by set_key
  }
  std::memcpy(k.data(), md, k.size());
  OPENSSL_cleanse(md, sizeof md);
  return k;
}

struct DataMac::Ctx {
  EVP_CIPHER_CTX* c = EVP_CIPHER_CTX_new();
  ~Ctx() { EVP_CIPHER_CTX_free(c); }
};

DataMac::DataMac() : ctx_(std::make_unique<Ctx>()) {}

DataMac::~DataMac() = default;

bool DataMac::set_key(const DataKey& key) {
  keyed_ = ctx_->c != nullptr && key != DataKey{} &&
           EVP_EncryptInit_ex(ctx_->c, EVP_aes_128_gcm(), nullptr, nullptr, nullptr) == 1 &&
           EVP_CIPHER_CTX_ctrl(ctx_->c, EVP_CTRL_GCM_SET_IVLEN, kIvSize, nullptr) == 1 &&
           EVP_EncryptInit_ex(ctx_->c, nullptr, nullptr, key.data(), nullptr) == 1;
  return keyed_;
}

bool DataMac::tag(const uint8_t* iv, const uint8_t* header, const uint8_t* body, size_t body_len,
                  uint8_t* out) {
  // GMAC: GCM with everything as additional authenticated data and nothing to encrypt.
  int n = 0;
  uint8_t none[1];
  return keyed_ && EVP_EncryptInit_ex(ctx_->c, nullptr, nullptr, nullptr, iv) == 1 &&
         EVP_EncryptUpdate(ctx_->c, nullptr, &n, header, static_cast<int>(kDataHeaderSize)) == 1 &&
         (body_len == 0 ||
          EVP_EncryptUpdate(ctx_->c, nullptr, &n, body, static_cast<int>(body_len)) == 1) &&
         EVP_EncryptFinal_ex(ctx_->c, none, &n) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx_->c, EVP_CTRL_GCM_GET_TAG, kTagSize, out) == 1;
}

bool DataMac::sign(const uint8_t* header, const uint8_t* body, size_t body_len, uint32_t sender,
                   uint64_t seq, uint8_t* trailer) {
  store_be<uint32_t>(trailer, sender);
  store_be<uint64_t>(trailer + 4, seq);
  return tag(trailer, header, body, body_len, trailer + kIvSize);
}

bool DataMac::verify(const uint8_t* header, const uint8_t* body, size_t body_len,
                     const uint8_t* trailer) {
  uint8_t want[kTagSize];
  return tag(trailer, header, body, body_len, want) &&
         CRYPTO_memcmp(want, trailer + kIvSize, kTagSize) == 0;
}

uint32_t DataMac::sender_of(const uint8_t* trailer) { return load_be<uint32_t>(trailer); }

}  // namespace conflux::proto
