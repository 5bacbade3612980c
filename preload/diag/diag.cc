// The diagnostics object's entry point and its symbolizer (diag.h): what
// the shim's reports use to name a call site's function.
#include "preload/diag/diag.h"

#include <string.h>

#include "absl/debugging/symbolize.h"

namespace parklot::internal::preload {
namespace {

// The function containing `addr` and `addr`'s offset into it. Abseil's
// symbolizer gives the name, not the start: the start is the lowest
// address below `addr` (within 1 MiB) that still symbolizes to the same
// name, found by bisection, as a function's code is contiguous.
bool Symbolize(uintptr_t addr, char* name, size_t size, uintptr_t* offset) {
  if (!absl::Symbolize(reinterpret_cast<void*>(addr), name,
                       static_cast<int>(size))) {
    return false;
  }
  char other[512];
  uintptr_t lo = addr > (uintptr_t{1} << 20) ? addr - (uintptr_t{1} << 20) : 1;
  uintptr_t hi = addr;  // symbolizes to `name`
  while (lo < hi) {
    const uintptr_t mid = lo + (hi - lo) / 2;
    if (absl::Symbolize(reinterpret_cast<void*>(mid), other, sizeof(other)) &&
        strcmp(other, name) == 0) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  *offset = addr - hi;
  return true;
}

}  // namespace
}  // namespace parklot::internal::preload

extern "C" __attribute__((visibility("default"))) int parklot_diag_open(
    uint32_t version, const parklot::internal::preload::DiagHost* host,
    parklot::internal::preload::DiagHooks* hooks) {
  using namespace parklot::internal::preload;
  if (version != kDiagVersion) return -1;
  // The executable's own symbols (argv[0] may be relative to another
  // directory, or gone).
  absl::InitializeSymbolizer("/proc/self/exe");
  hooks->symbolize = Symbolize;
  InstallNameHooks(hooks);
  InstallDeadlockHooks(host, hooks);
  return 0;
}
