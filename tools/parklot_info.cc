// `parklot info`: the configuration the PARKLOT_* environment selects, and
// whether the preload shim is active in this process. With the shim loaded,
// the shim's own lot is described (its copy of the runtime parsed the
// environment once already; a second parse here would report each rejected
// knob again).
#include <dlfcn.h>

#include <cstddef>
#include <cstdio>
#include <string>

#include "runtime/stats.h"

int main() {
  using Describe = size_t (*)(char*, size_t);
  const auto shim_describe = reinterpret_cast<Describe>(
      dlsym(RTLD_DEFAULT, "parklot_preload_describe"));
  std::string lot;
  if (shim_describe != nullptr) {
    lot.resize(shim_describe(nullptr, 0) + 1);
    lot.resize(shim_describe(lot.data(), lot.size()));
  } else {
    lot = parklot::DescribeLot();
  }
  std::fputs(lot.c_str(), stdout);
  const bool shim = dlsym(RTLD_DEFAULT, "parklot_preload_active") != nullptr;
  std::printf("preload shim: %s\n", shim ? "active" : "not loaded");
  return 0;
}
