#include "runtime/stats.h"

#include "absl/strings/str_format.h"

namespace parklot {

std::string FormatStats(const Stats& s) {
  return absl::StrFormat(
      "table: %zu buckets, %u growths, %u growth failures\n"
      "retired tables: %u, %u KiB (kept mapped)\n"
      "threads: %zu live, %u registered\n"
      "parks: %u (timed out %u, refused by validate %u)\n"
      "unparks: %u\n"
      "spins: %u phases, %u acquired while spinning\n"
      "handoffs: %u\n"
      "bucket locks: %u contended (%u won spinning, %u slept), %u sleeps, "
      "%u wakes\n"
      "bucket lock holds: %u sampled, mean %u ns, %u of 20 us or more "
      "(holder descheduled)\n"
      "growth reasons: %u for threads, %u for collisions; collisions: %u of "
      "%u sampled bucket locks (%.1f%%)\n",
      s.buckets, s.growths, s.growth_failures, s.retired_tables,
      (s.retired_bytes + 1023) / 1024, s.live_threads,
      s.threads_registered, s.parks, s.timeouts, s.invalid, s.unparks, s.spins,
      s.spin_acquired, s.handoffs, s.bucket_lock_contended,
      s.bucket_lock_spin_won, s.bucket_lock_slept, s.bucket_lock_sleeps,
      s.bucket_lock_wakes, s.bucket_lock_hold_samples,
      s.bucket_lock_hold_samples == 0
          ? 0
          : s.bucket_lock_hold_ns / s.bucket_lock_hold_samples,
      s.bucket_lock_long_holds, s.growths - s.collision_growths,
      s.collision_growths, s.sampled_collisions, s.sampled_locks,
      s.sampled_locks == 0 ? 0.0
                           : 100.0 * static_cast<double>(s.sampled_collisions) /
                                 static_cast<double>(s.sampled_locks));
}

}  // namespace parklot
