#include "runtime/global_table.h"

#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <new>

#include "base/futex.h"
#include "base/text.h"
#include "hash/lock_section.h"
#include "runtime/config.h"
#include "runtime/fork.h"
#include "runtime/registry.h"
#include "runtime/stats.h"
#include "runtime/thread_data.h"

namespace parklot::internal {

constinit std::atomic<int> g_init{0};

namespace {

alignas(BucketTable) unsigned char g_table_storage[sizeof(BucketTable)];

// The CPUs at start-up: in the affinity mask (the spin policy's), read by
// a load-time constructor, before main and so before any sandbox the
// program installs (docs/design.md section 6, invariant 9: glibc makes no
// sched_getaffinity for a program that never asks), or by the first use of
// the lot if that comes earlier (another library's constructor). Written
// once before any thread can read it. The same moment reads whether the
// process starts real-time (ReadStartupScheduling).
size_t g_affinity_cpus = 0;
// The online CPUs (the `cpus` growth policy's alone): 0 until
// ReadOnlineCpus. Reading them costs an open, a read and a close of
// /sys/devices/system/cpu/online, so only a process whose policy is
// `cpus` pays it (docs/design.md section 3.13).
std::atomic<size_t> g_online_cpus{0};

void ReadStartupCpus() {
  if (g_affinity_cpus != 0) return;
  ReadStartupScheduling();
  cpu_set_t set;
  const int n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
  g_affinity_cpus = n > 0 ? static_cast<size_t>(n) : 1;
}

}  // namespace

void ReadOnlineCpus() {
  if (g_online_cpus.load(std::memory_order_relaxed) != 0 ||
      GetConfig().table.policy != GrowthPolicy::kCpus) {
    return;
  }
  // Racing readers (the shim's constructor, a first use from another
  // library's thread) store the same count.
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  g_online_cpus.store(online > 0 ? static_cast<size_t>(online) : 1,
                      std::memory_order_relaxed);
}

namespace {

void InitOnce() {
  // From before the claim to the end: a signal handler of this thread that
  // ran in between and locked a contended lock would wait for this very
  // start-up, or leave it claimed for ever by jumping out; the shim
  // delivers it at the section's end (hash/lock_section.h).
  SectionScope section;
  int expected = 0;
  if (g_init.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
    ReadStartupCpus();
    registry::Init(g_affinity_cpus);
    ReadOnlineCpus();
    TableOptions table = GetConfig().table;
    if (table.cpus == 0) table.cpus = g_online_cpus.load(std::memory_order_relaxed);
    new (g_table_storage) BucketTable(table);
    if (GetConfig().stats) BucketLock::EnableHoldTiming();
    InstallDeferredUnparkRunner();
    g_init.store(2, std::memory_order_release);
    return;
  }
  while (g_init.load(std::memory_order_acquire) != 2) CpuRelax();
}

// fork(): the ForkStep::kLot step (runtime/fork.h runs it, innermost of
// the program's handlers; see BucketTable::LockAllForFork). ForkParent and
// ForkChild run only if ForkPrepare took the locks (g_init may turn 2
// between the two).
bool ForkPrepare() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  if (g_init.load(std::memory_order_acquire) != 2) return false;
  // Registered first: registering needs the registry lock taken below.
  CurrentThreadData();
  registry::LockForFork();
  reinterpret_cast<BucketTable*>(g_table_storage)->LockAllForFork();
  return true;
}

void ForkParent() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  reinterpret_cast<BucketTable*>(g_table_storage)->UnlockAllAfterFork();
  registry::UnlockAfterFork();
}

void ForkChild() ABSL_NO_THREAD_SAFETY_ANALYSIS {
  reinterpret_cast<BucketTable*>(g_table_storage)->ResetInChildAfterFork();
  registry::ResetInForkChild();
}

constexpr ForkHandlers kLotForkStep{ForkPrepare, ForkParent, ForkChild};

// At load time: the fork step, and what the lot reads of the machine.
__attribute__((constructor)) void AtLoad() {
  RegisterForkStep(ForkStep::kLot, &kLotForkStep);
  ReadStartupCpus();
}

}  // namespace

BucketTable& GlobalTable() {
  if (g_init.load(std::memory_order_acquire) != 2) InitOnce();
  return *reinterpret_cast<BucketTable*>(g_table_storage);
}

void DescribeLot(TextBuffer* out) {
  BucketTable& table = GlobalTable();
  out->Add("config: ");
  DescribeConfig(GetConfig(), out);
  out->Add("\ncpus: %zu in the affinity mask\ntable: %zu buckets now, growth %s\n",
           registry::AllowedCpus(), table.bucket_count(),
           table.immutable() ? "off (immutable)" : "on");
}

}  // namespace parklot::internal
