/* checksum.h: a fast 64-bit hash of bytes, for content checks (not for security).
 * Four independent multiply-rotate lanes over 8-byte words, so that one core hashes several GB/s;
 * the tail and the length are folded in, and the lanes are mixed at the end. A hash seeded with a
 * row's global index and summed over rows (mod 2^64) gives a checksum of a whole dataset that does
 * not depend on how its rows are split over ranks or threads. */
#ifndef VECANNEAL_CHECKSUM_H
#define VECANNEAL_CHECKSUM_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t va_hash_mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

static inline uint64_t va_hash_lane(uint64_t lane, uint64_t word) {
  lane ^= word * 0x9e3779b97f4a7c15ull;
  lane = (lane << 31) | (lane >> 33);
  return lane * 0xbf58476d1ce4e5b9ull;
}

static inline uint64_t va_hash_bytes(const void *data, size_t bytes, uint64_t seed) {
  const unsigned char *p = data;
  uint64_t l0 = va_hash_mix(seed + 1), l1 = va_hash_mix(seed + 2), l2 = va_hash_mix(seed + 3),
           l3 = va_hash_mix(seed + 4);
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) {
    uint64_t w[4];
    memcpy(w, p + i, 32);
    l0 = va_hash_lane(l0, w[0]);
    l1 = va_hash_lane(l1, w[1]);
    l2 = va_hash_lane(l2, w[2]);
    l3 = va_hash_lane(l3, w[3]);
  }
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    l0 = va_hash_lane(l0, w);
  }
  uint64_t tail = 0;
  if (i < bytes) memcpy(&tail, p + i, bytes - i);
  l1 = va_hash_lane(l1, tail ^ ((uint64_t)bytes << 56));
  return va_hash_mix(l0 ^ va_hash_mix(l1 ^ va_hash_mix(l2 ^ va_hash_mix(l3 ^ bytes))));
}

/* The rank- and thread-independent checksum of nrows rows of row_bytes each, the first being global
 * row row0: sum over rows of the row's hash seeded with its index. */
uint64_t va_rows_checksum(const void *rows, size_t row_bytes, int64_t row0, int64_t nrows, int threads);
#endif
