#pragma once
// SplitMix64 (Steele, Lea and Flood 2014): a 64-bit mixing function. The host's random fills key their
// streams with it (the GPU's use cuRAND's Philox), and the algorithms derive each round's and level's
// seed from the user's with it.
#include <cstdint>

namespace h2expr::detail {

constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace h2expr::detail
