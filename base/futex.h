// Kernel futex calls made by parklot itself.
//
// They go straight to the `syscall` instruction, never through glibc's
// `syscall()` wrapper: the preload shim may interpose that wrapper (issue:
// private syscall(SYS_futex) waits), and parklot's own sleeping must never be
// routed back into the parking lot.
#ifndef PARKLOT_BASE_FUTEX_H_
#define PARKLOT_BASE_FUTEX_H_

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>

#include <atomic>
#include <cstdint>

namespace parklot::internal {

// Issues a raw system call. Returns the kernel's result: >= 0 on success,
// -errno on failure (errno itself is not touched). Thread-safe.
inline long RawSyscall6(long nr, long a1, long a2, long a3, long a4, long a5,
                        long a6) {
  long ret;
  register long r10 __asm__("r10") = a4;
  register long r8 __asm__("r8") = a5;
  register long r9 __asm__("r9") = a6;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8),
                     "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
}

// futex(2) with the kernel's argument order. Returns >= 0 or -errno.
inline long RawFutex(const void* uaddr, int op, uint32_t val,
                     const struct timespec* timeout, const void* uaddr2,
                     uint32_t val3) {
  return RawSyscall6(SYS_futex, reinterpret_cast<long>(uaddr), op, val,
                     reinterpret_cast<long>(timeout),
                     reinterpret_cast<long>(uaddr2), val3);
}

// Sleeps while *word == expected (process-private futex, no timeout).
// Returns 0 when woken, -EAGAIN if the word differed, -EINTR on a signal;
// callers re-check their condition in every case.
inline long FutexWaitPrivate(const std::atomic<uint32_t>* word,
                             uint32_t expected) {
  return RawFutex(word, FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

// Wakes up to `count` threads sleeping on `word` (process-private).
// Returns the number woken or -errno. Safe to call on memory that was freed
// and reused: a stray wake is harmless to any futex user.
inline long FutexWakePrivate(const std::atomic<uint32_t>* word, int count) {
  return RawFutex(word, FUTEX_WAKE_PRIVATE, static_cast<uint32_t>(count),
                  nullptr, nullptr, 0);
}

// Spin-wait hint for the CPU (x86 PAUSE).
inline void CpuRelax() { __builtin_ia32_pause(); }

}  // namespace parklot::internal

#endif  // PARKLOT_BASE_FUTEX_H_
