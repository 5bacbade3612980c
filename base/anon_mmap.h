// Zero-filled private memory straight from the kernel, for tables that
// paths which may not malloc (lock paths, signal handlers, a fork child)
// use. The one place parklot maps anonymous memory.
#ifndef PARKLOT_BASE_ANON_MMAP_H_
#define PARKLOT_BASE_ANON_MMAP_H_

#include <errno.h>
#include <sys/mman.h>

#include <cstddef>

namespace parklot::internal {

// Maps `bytes` (rounded up to whole pages by the kernel) of zero-filled,
// private, read-write memory: mmap(MAP_PRIVATE | MAP_ANONYMOUS). `reserve`:
// whether the kernel charges the whole size to the commit limit now, so
// that under strict overcommit a mapping it cannot back fails here (rather
// than a page fault later killing the process); false adds MAP_NORESERVE,
// for large tables mostly left untouched. Returns the page-aligned start,
// or nullptr if the kernel refuses (no memory, map count, bytes 0); errno
// is left as it was either way. Free with munmap(p, bytes). Any thread;
// async-signal-safe (one system call, no lock, no malloc).
inline void* MapAnonymous(size_t bytes, bool reserve) {
  const int saved_errno = errno;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | (reserve ? 0 : MAP_NORESERVE),
                 -1, 0);
  errno = saved_errno;
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace parklot::internal

// For a zero-filled static array of a page or more: placed in .lbss, which
// the x86-64 link puts after every object's .bss, so that the small
// variables a process writes at start-up share a page or two instead of
// being spread between the large arrays (each page first written is a page
// fault, a cost every process pays under a system-wide preload). Zero
// cost to reach: the arrays stay in the same mapping.
#define PARKLOT_LARGE_BSS __attribute__((section(".lbss")))

#endif  // PARKLOT_BASE_ANON_MMAP_H_
