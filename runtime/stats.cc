#include "runtime/stats.h"

#include "absl/strings/str_format.h"

namespace parklot {

std::string FormatStats(const Stats& s) {
  return absl::StrFormat(
      "table: %zu buckets, %u growths, %u growth failures\n"
      "threads: %zu live, %u registered\n"
      "parks: %u (timed out %u, refused by validate %u)\n"
      "unparks: %u\n"
      "spins: %u phases, %u acquired while spinning\n"
      "handoffs: %u\n"
      "growth reasons: %u for threads, %u for collisions; collisions: %u of "
      "%u sampled bucket locks (%.1f%%)\n",
      s.buckets, s.growths, s.growth_failures, s.live_threads,
      s.threads_registered, s.parks, s.timeouts, s.invalid, s.unparks, s.spins,
      s.spin_acquired, s.handoffs, s.growths - s.collision_growths,
      s.collision_growths, s.sampled_collisions, s.sampled_locks,
      s.sampled_locks == 0 ? 0.0
                           : 100.0 * static_cast<double>(s.sampled_collisions) /
                                 static_cast<double>(s.sampled_locks));
}

}  // namespace parklot
