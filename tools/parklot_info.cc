// `parklot info`: the configuration the PARKLOT_* environment selects, and
// whether the preload shim is active in this process.
#include <dlfcn.h>

#include <cstdio>

#include "runtime/config.h"
#include "runtime/thread_data.h"

int main() {
  const parklot::Config& c = parklot::GetConfig();
  std::printf("config: %s\n", parklot::DescribeConfig(c).c_str());
  std::printf("cpus: %zu in the affinity mask\n",
              parklot::registry::AllowedCpus());
  std::printf("table: %zu buckets now, growth %s\n",
              parklot::GlobalTable().bucket_count(),
              parklot::GlobalTable().immutable() ? "off (immutable)" : "on");
  const bool shim = dlsym(RTLD_DEFAULT, "parklot_preload_active") != nullptr;
  std::printf("preload shim: %s\n", shim ? "active" : "not loaded");
  return 0;
}
