#include "preload/task_model.h"

extern "C" {
constinit __attribute__((tls_model("initial-exec"))) thread_local int
    parklot_vfork_depth = 0;
}
