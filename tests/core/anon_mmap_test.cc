// base/anon_mmap.h: zero-filled writable memory, nullptr on failure, errno
// untouched either way.
#include "base/anon_mmap.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#include "gtest/gtest.h"

namespace parklot::internal {
namespace {

TEST(MapAnonymous, ZeroFilledWritablePageAlignedMemory) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (bool reserve : {true, false}) {
    const size_t bytes = 3 * page + 1;
    auto* p = static_cast<unsigned char*>(MapAnonymous(bytes, reserve));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % page, 0u);
    for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(p[i], 0) << i;
    p[0] = 1;
    p[bytes - 1] = 2;
    EXPECT_EQ(p[0] + p[bytes - 1], 3);
    EXPECT_EQ(munmap(p, bytes), 0);
  }
}

TEST(MapAnonymous, FailureIsNullptrAndLeavesErrno) {
  // 0 bytes: EINVAL from the kernel; 2^62 bytes with the commit charged:
  // more than any machine's commit limit (ENOMEM).
  for (size_t bytes : {size_t{0}, size_t{1} << 62}) {
    errno = 1234;
    EXPECT_EQ(MapAnonymous(bytes, /*reserve=*/true), nullptr) << bytes;
    EXPECT_EQ(errno, 1234) << bytes;
  }
}

}  // namespace
}  // namespace parklot::internal
