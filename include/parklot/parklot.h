// <parklot/parklot.h>: every parklot primitive (each <parklot/NAME.h>).
#ifndef PARKLOT_INCLUDE_PARKLOT_PARKLOT_H_
#define PARKLOT_INCLUDE_PARKLOT_PARKLOT_H_

#include "parklot/barrier.h"
#include "parklot/condvar.h"
#include "parklot/latch.h"
#include "parklot/mutex.h"
#include "parklot/once.h"
#include "parklot/scheduling.h"
#include "parklot/semaphore.h"
#include "parklot/shared_mutex.h"

#endif  // PARKLOT_INCLUDE_PARKLOT_PARKLOT_H_
