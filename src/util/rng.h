/* rng.h: counter-based randomness. Every draw is a pure function of (seed, purpose, id, counter), so
 * the same global row or anchor gets the same number whichever rank owns it and however many ranks
 * there are (docs/algorithm.md section 4). The mixer is SplitMix64's finaliser applied in a chain. */
#ifndef VECANNEAL_RNG_H
#define VECANNEAL_RNG_H
#include <math.h>
#include <stdint.h>

enum {
  VA_RNG_GEN_CLUSTER = 1,
  VA_RNG_GEN_NOISE,
  VA_RNG_GEN_CENTER,
  VA_RNG_GEN_OUTLIER,
  VA_RNG_GEN_TEST,
  VA_RNG_INIT_RANDOM,
  VA_RNG_INIT_FIRST,
  VA_RNG_INIT_SAMPLE,
  VA_RNG_INIT_PP,
  VA_RNG_RESEED,
};

static inline uint64_t va_mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static inline uint64_t va_rand_u64(uint64_t seed, uint64_t purpose, uint64_t id, uint64_t counter) {
  return va_mix64(va_mix64(va_mix64(seed ^ (purpose * 0xD1B54A32D192ED03ull)) ^ id) ^ counter);
}

/* Uniform in [0, 1). */
static inline double va_rand_unit(uint64_t seed, uint64_t purpose, uint64_t id, uint64_t counter) {
  return (double)(va_rand_u64(seed, purpose, id, counter) >> 11) * 0x1p-53;
}

/* Standard normal (Box-Muller on two counter slots). */
static inline double va_rand_normal(uint64_t seed, uint64_t purpose, uint64_t id, uint64_t counter) {
  double u1 = va_rand_unit(seed, purpose, id, 2 * counter), u2 = va_rand_unit(seed, purpose, id, 2 * counter + 1);
  if (u1 < 0x1p-60) u1 = 0x1p-60;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
#endif
