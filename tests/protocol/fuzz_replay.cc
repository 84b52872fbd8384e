// SPDX-License-Identifier: Apache-2.0
// Runs a libFuzzer target without libFuzzer (any compiler): every file of the seed
// corpus, then deterministic random mutations of them. A target that aborts fails.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <corpus_dir> <mutations>\n", argv[0]);
    return 2;
  }
  std::vector<std::vector<uint8_t>> seeds;
  for (const auto& e : std::filesystem::directory_iterator(argv[1])) {
    std::ifstream f(e.path(), std::ios::binary);
    seeds.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "empty corpus %s\n", argv[1]);
    return 1;
  }
  for (const auto& s : seeds) LLVMFuzzerTestOneInput(s.data(), s.size());
  std::mt19937_64 rng(12345);
  const long n = std::atol(argv[2]);
  for (long i = 0; i < n; ++i) {
    auto d = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 4) {
        case 0:
          if (!d.empty()) d[rng() % d.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
          break;
        case 1:
          if (!d.empty()) d[rng() % d.size()] = static_cast<uint8_t>(rng());
          break;
        case 2:
          d.resize(rng() % (d.size() + 8));
          break;
        default:
          d.insert(d.begin() + static_cast<long>(rng() % (d.size() + 1)),
                   static_cast<uint8_t>(rng()));
      }
    }
    LLVMFuzzerTestOneInput(d.data(), d.size());
  }
  std::printf("replayed %zu seeds and %ld mutations\n", seeds.size(), n);
  return 0;
}
