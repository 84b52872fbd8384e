// SPDX-License-Identifier: Apache-2.0
// bench_mac: what a per-packet MAC would cost the aggregator, next to the work it already does
// per packet, all measured in one run on one core: memcpy of the packet, the fp32 sum kernel
// over its payload (conflux::reduce::accumulate), and tagging header + payload with
// AES-128-GMAC, ChaCha20-Poly1305 (AAD only) and HMAC-SHA256 through OpenSSL EVP.
// Sizes: the MTU payload (1500 - 20 IP - 8 UDP - 48 header = 1424 bytes) and 8 KiB, each with
// its 48-byte header. Packets cycle through a 2 MiB working set (cache-resident, like a
// socket's receive batch). Groundwork for the optional data MAC: no wire format uses it yet.
//   bench_mac [--quick] [--json FILE]
#include <openssl/evp.h>
#include <openssl/params.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "conflux/common/json_text.h"
#include "conflux/common/reduce.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kHeader = 48;
constexpr size_t kWorkingSet = 2u << 20;

struct Result {
  std::string name;
  size_t payload = 0;
  double gbps = 0;  // payload bytes per second / 1e9, one core
};

// Runs f(packet index) over `packets` packets of `bytes` for at least `seconds`; GB/s of
// `payload` bytes per packet.
double measure(size_t payload, double seconds, size_t n_packets,
               const std::function<void(size_t)>& f) {
  for (size_t i = 0; i < n_packets; ++i) f(i);  // warm up
  size_t done = 0;
  const auto t0 = Clock::now();
  double elapsed = 0;
  do {
    for (size_t i = 0; i < n_packets; ++i) f(i);
    done += n_packets;
    elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (elapsed < seconds);
  return double(done) * double(payload) / elapsed / 1e9;
}

class Aead {  // AES-GCM or ChaCha20-Poly1305 with the packet as AAD only (= a MAC)
 public:
  Aead(const EVP_CIPHER* c, const uint8_t* key) : ctx_(EVP_CIPHER_CTX_new()) {
    EVP_EncryptInit_ex(ctx_, c, nullptr, key, nullptr);
  }
  ~Aead() { EVP_CIPHER_CTX_free(ctx_); }
  bool rekey(const uint8_t* key) {
    return EVP_EncryptInit_ex(ctx_, nullptr, nullptr, key, nullptr) == 1;
  }
  bool tag(const uint8_t* iv, const uint8_t* data, size_t len, uint8_t* tag16) {
    int outl = 0;
    uint8_t none[1];
    return EVP_EncryptInit_ex(ctx_, nullptr, nullptr, nullptr, iv) == 1 &&
           EVP_EncryptUpdate(ctx_, nullptr, &outl, data, static_cast<int>(len)) == 1 &&
           EVP_EncryptFinal_ex(ctx_, none, &outl) == 1 &&
           EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_AEAD_GET_TAG, 16, tag16) == 1;
  }

 private:
  EVP_CIPHER_CTX* ctx_;
};

class Hmac {
 public:
  explicit Hmac(const uint8_t* key) {
    mac_ = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    ctx_ = EVP_MAC_CTX_new(mac_);
    char digest[] = "SHA256";
    OSSL_PARAM p[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0), OSSL_PARAM_END};
    EVP_MAC_init(ctx_, key, 32, p);
  }
  ~Hmac() {
    EVP_MAC_CTX_free(ctx_);
    EVP_MAC_free(mac_);
  }
  bool tag(const uint8_t* data, size_t len, uint8_t* out32) {
    size_t outl = 0;
    return EVP_MAC_init(ctx_, nullptr, 0, nullptr) == 1 && EVP_MAC_update(ctx_, data, len) == 1 &&
           EVP_MAC_final(ctx_, out32, &outl, 32) == 1;
  }

 private:
  EVP_MAC* mac_ = nullptr;
  EVP_MAC_CTX* ctx_ = nullptr;
};

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0.5;
  std::string json;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") {
      seconds = 0.05;
    } else if (a == "--json" && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr, "usage: bench_mac [--quick] [--json FILE]\n");
      return 2;
    }
  }
  uint8_t key[32];
  for (int i = 0; i < 32; ++i) key[i] = uint8_t(i * 7 + 1);
  std::vector<Result> results;
  bool ok = true;
  for (const size_t payload : {size_t{1424}, size_t{8192}}) {
    const size_t bytes = kHeader + payload;
    const size_t n = kWorkingSet / bytes;
    std::vector<uint8_t> pkts(n * bytes), dst(bytes);
    for (size_t i = 0; i < pkts.size(); ++i) pkts[i] = uint8_t(i * 131 + 7);
    // fp32 payloads of small exact values (no NaN/Inf in the kernel's way)
    for (size_t i = 0; i < n; ++i) {
      float* f = reinterpret_cast<float*>(pkts.data() + i * bytes + kHeader);
      for (size_t k = 0; k < payload / 4; ++k) f[k] = float(k % 17);
    }
    std::vector<float> acc(payload / 4, 0.f);
    uint8_t tag[32];
    uint8_t iv[12] = {};
    uint64_t seq = 0;
    auto next_iv = [&] {  // a fresh nonce per packet, as a sender's counter would give
      ++seq;
      std::memcpy(iv + 4, &seq, 8);
      return iv;
    };
    auto pkt = [&](size_t i) { return pkts.data() + (i % n) * bytes; };
    results.push_back({"memcpy", payload, measure(payload, seconds, n, [&](size_t i) {
                         std::memcpy(dst.data(), pkt(i), bytes);
                       })});
    results.push_back({"reduce_f32_sum", payload, measure(payload, seconds, n, [&](size_t i) {
                         conflux::reduce::accumulate(conflux::DType::kFloat32, conflux::Op::kSum,
                                                     acc.data(), pkt(i) + kHeader, payload / 4);
                       })});
    Aead gmac(EVP_aes_128_gcm(), key);
    results.push_back({"aes128_gmac", payload, measure(payload, seconds, n, [&](size_t i) {
                         ok &= gmac.tag(next_iv(), pkt(i), bytes, tag);
                       })});
    // The same, keyed again before every packet: what a dataplane queue paid per packet while
    // two jobs' packets alternated and it kept one key (SlotEngine::KeyedMac, before it kept
    // the last four).
    results.push_back({"aes128_gmac_rekeyed", payload, measure(payload, seconds, n, [&](size_t i) {
                         ok &= gmac.rekey(key) && gmac.tag(next_iv(), pkt(i), bytes, tag);
                       })});
    Aead poly(EVP_chacha20_poly1305(), key);
    results.push_back({"chacha20_poly1305", payload, measure(payload, seconds, n, [&](size_t i) {
                         ok &= poly.tag(next_iv(), pkt(i), bytes, tag);
                       })});
    Hmac hmac(key);
    results.push_back({"hmac_sha256", payload, measure(payload, seconds, n, [&](size_t i) {
                         ok &= hmac.tag(pkt(i), bytes, tag);
                       })});
  }
  if (!ok) {
    std::fprintf(stderr, "bench_mac: an OpenSSL call failed\n");
    return 1;
  }
  std::printf("%-20s %8s %12s %16s\n", "kernel", "payload", "GB/s/core", "time vs reduce");
  for (const Result& r : results) {
    double reduce = 0;
    for (const Result& q : results) {
      if (q.payload == r.payload && q.name == "reduce_f32_sum") reduce = q.gbps;
    }
    // Extra CPU per byte that a MAC adds to the reduction: (1/mac) / (1/reduce).
    std::printf("%-20s %8zu %12.2f %15.0f%%\n", r.name.c_str(), r.payload, r.gbps,
                100.0 * reduce / r.gbps);
  }
  if (!json.empty()) {
    using conflux::json::Json;
    Json list = Json::array();
    for (const Result& r : results) {
      list.push_back(
          {{"name", r.name}, {"payload", r.payload}, {"gbps", conflux::json::sig6(r.gbps)}});
    }
    std::ofstream(json) << conflux::json::one_line(Json{{"results", std::move(list)}}) << "\n";
  }
  return 0;
}
