#include "sync/scheduling.h"

#include "runtime/parking_lot.h"

namespace parklot {

void SchedulingChanged(bool real_time) noexcept {
  internal::SchedulingChanged(real_time);
}

}  // namespace parklot
