// Fibonacci hashing (Knuth, TAOCP vol. 3, 6.4): multiply by 2^64/phi and
// keep the high bits. The multiplication is a bijection on 64-bit keys whose
// high bits depend on every key bit, so keys that differ only in low bits
// (addresses a few cache lines apart) land far apart. The one place parklot
// spells the multiplier; every table keyed by an address hashes with these.
#ifndef PARKLOT_HASH_FIBONACCI_HASH_H_
#define PARKLOT_HASH_FIBONACCI_HASH_H_

#include <cstdint>

namespace parklot::internal {

// `key` * 2^64/phi, modulo 2^64 (the multiplier is odd: no two keys share a
// product). For hashes that combine several keys; a table index wants the
// top bits, FibonacciHash. Pure; any thread, async-signal-safe.
inline constexpr uint64_t FibonacciMix(uint64_t key) {
  return key * 0x9E3779B97F4A7C15ull;
}

// The top `bits` bits of `key` * 2^64/phi: an index into a table of
// 2^bits slots. `bits` from 0 (a one-slot table: always 0) to 63. Pure; any
// thread, async-signal-safe. Two shifts rather than one so that `bits` 0
// needs no branch (a shift by 64 is undefined); constant `bits` folds to
// one.
inline constexpr uint64_t FibonacciHash(uint64_t key, unsigned bits) {
  return FibonacciMix(key) >> (63 - bits) >> 1;
}

}  // namespace parklot::internal

#endif  // PARKLOT_HASH_FIBONACCI_HASH_H_
