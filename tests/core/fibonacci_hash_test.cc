// hash/fibonacci_hash.h, and that the bucket table indexes with it: the
// indexes are the top bits of the product with 2^64/phi, written out here
// independently of the helper.
#include "hash/fibonacci_hash.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "hash/bucket_table.h"

namespace parklot::internal {
namespace {

constexpr uint64_t kPhi = 0x9E3779B97F4A7C15ull;  // 2^64/phi, rounded to odd
constexpr uint64_t kKeys[] = {0,          1,           64,
                              0xdeadbeef, 0x7ffe12345678, ~uint64_t{0}};

static_assert(FibonacciHash(12345, 0) == 0, "usable in constant expressions");

TEST(FibonacciHash, IsTheTopBitsOfTheProduct) {
  for (uint64_t key : kKeys) {
    EXPECT_EQ(FibonacciMix(key), key * kPhi);
    EXPECT_EQ(FibonacciHash(key, 0), 0u) << key;
    for (unsigned bits = 1; bits <= 63; ++bits) {
      EXPECT_EQ(FibonacciHash(key, bits), (key * kPhi) >> (64 - bits))
          << key << " " << bits;
    }
  }
}

TEST(FibonacciHash, SpreadsNeighbouringAddresses) {
  // Keys one cache line apart take different slots of a 64-slot table.
  bool seen[64] = {};
  for (uint64_t i = 0; i < 16; ++i) {
    const uint64_t slot = FibonacciHash(0x7f0000001000 + 64 * i, 6);
    EXPECT_FALSE(seen[slot]) << i;
    seen[slot] = true;
  }
}

TEST(FibonacciHash, BucketTableIndexesWithIt) {
  for (unsigned log2 : {0u, 1u, 4u, 10u}) {
    TableOptions o;
    o.policy = GrowthPolicy::kFixed;
    o.buckets = size_t{1} << log2;
    BucketTable t(o);
    ASSERT_EQ(t.bucket_count(), size_t{1} << log2);
    for (uint64_t key : kKeys) {
      EXPECT_EQ(t.BucketIndex(key),
                log2 == 0 ? 0 : (key * kPhi) >> (64 - log2))
          << key << " " << log2;
    }
  }
}

}  // namespace
}  // namespace parklot::internal
