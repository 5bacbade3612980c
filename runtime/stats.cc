#include "runtime/stats.h"


namespace parklot::internal {

void FormatStats(const Stats& s, TextBuffer* out) {
  out->Add(
      "table: %zu buckets, %lu growths, %lu growth failures\n"
      "retired tables: %lu, %lu KiB (kept mapped)\n"
      "threads: %zu live, %lu registered\n"
      "parks: %lu (timed out %lu, refused by validate %lu)\n"
      "unparks: %lu\n"
      "spins: %lu phases, %lu acquired while spinning\n"
      "handoffs: %lu\n"
      "bucket locks: %lu contended (%lu won spinning, %lu slept), %lu sleeps, "
      "%lu wakes\n"
      "bucket lock holds: %lu sampled, mean %lu ns, %lu of 20 us or more "
      "(holder descheduled)\n"
      "growth reasons: %lu for threads, %lu for collisions; collisions: %lu of "
      "%lu sampled bucket locks (%.1f%%)\n",
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

}  // namespace parklot::internal
