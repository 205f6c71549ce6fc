#pragma once
// A seeded random number generator of our own, so that "the same seed gives the same output,
// bit for bit" holds across compilers and standard libraries. std::mt19937_64 itself is fully
// specified, but std::uniform_real_distribution and friends are not (libstdc++ and libc++ turn
// the same bits into different floats, and libstdc++ changed its own algorithm once), so every
// step from seed to float is written out here.
//
// Algorithm: xoshiro256** 1.0 (Blackman and Vigna, 2018; public-domain reference at
// https://prng.di.unimi.it/), 256 bits of state, period 2^256 - 1. The state is filled from the
// 64-bit seed by four successive outputs of splitmix64 (the seeding the authors recommend): it
// spreads any seed, 0 included, over the whole state and never yields the all-zero state.
//
// Floats are built from the top bits of one 64-bit output, never by dividing by UINT64_MAX
// (which can round up to exactly 1):
//   uniform_float()  = (x >> 40) * 2^-24   24 bits: every value is an exact float in [0, 1)
//   uniform_double() = (x >> 11) * 2^-53   53 bits: every value is an exact double in [0, 1)

#include <cstdint>

namespace llmctl {

// splitmix64 (Steele, Lea and Flood, 2014): one step advances `state` by the golden-ratio
// increment and returns a mixed copy of it.
inline uint64_t splitmix64_next(uint64_t& state) {
  state += 0x9E3779B97F4A7C15ull;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed = 0) { reseed(seed); }

  void reseed(uint64_t seed) {
    uint64_t sm = seed;
    for (uint64_t& word : s_) word = splitmix64_next(sm);
  }

  // xoshiro256**: output = rotl(s1 * 5, 7) * 9, then the linear state update.
  uint64_t next_u64() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 24 random bits (the float mantissa), exact multiples of 2^-24.
  float uniform_float() {
    return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f);  // 2^24
  }

  // Uniform in [0, 1) with 53 random bits, exact multiples of 2^-53. The sampler draws with
  // this one: with 128k-token vocabularies, 24 bits could not reach tokens of probability
  // below about 6e-8 at all.
  double uniform_double() {
    return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0);  // 2^53
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4] = {0, 0, 0, 0};
};

}  // namespace llmctl
