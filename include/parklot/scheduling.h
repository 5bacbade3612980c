// <parklot/scheduling.h>: parklot::SchedulingChanged, documented in
// sync/scheduling.h. The installed include path (README, "Use as a
// library").
#ifndef PARKLOT_INCLUDE_PARKLOT_SCHEDULING_H_
#define PARKLOT_INCLUDE_PARKLOT_SCHEDULING_H_

#include "sync/scheduling.h"

#endif  // PARKLOT_INCLUDE_PARKLOT_SCHEDULING_H_
