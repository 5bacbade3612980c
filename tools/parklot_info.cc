// `parklot info`: the configuration the PARKLOT_* environment selects, and
// whether the preload shim is active in this process. With the shim loaded,
// the shim's own lot is described (its copy of the runtime parsed the
// environment once already; a second parse here would report each rejected
// knob again).
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <string>

#include "runtime/config.h"
#include "runtime/stats.h"

namespace {

// Where the reports go, as the environment selects (the config line above
// names the knobs, not the paths). The environment is parsed again here
// with stderr closed: the lot's own parse has reported any bad value.
void PrintReportPaths() {
  std::fflush(stderr);
  const int saved = dup(2);
  const int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (saved >= 0 && null >= 0) dup2(null, 2);
  const parklot::Config c = parklot::ConfigFromEnvironment();
  if (saved >= 0 && null >= 0) dup2(saved, 2);
  if (saved >= 0) close(saved);
  if (null >= 0) close(null);
  const auto where = [](const char* path) {
    return std::string(path) + " (%p = the pid)";
  };
  std::printf("stats report: %s\n",
              !c.stats ? "off"
              : c.stats_path != nullptr ? where(c.stats_path).c_str()
                                        : "stderr");
  std::printf("diagnostic reports: %s\n",
              c.report_path != nullptr ? where(c.report_path).c_str() : "stderr");
  if (c.profile_path != nullptr) {
    std::printf("contention profile: %s and .holders, 1 in %d contended acquisitions\n",
                where(c.profile_path).c_str(), c.profile_rate);
  } else {
    std::printf("contention profile: off\n");
  }
}

}  // namespace

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
  PrintReportPaths();
  const bool shim = dlsym(RTLD_DEFAULT, "parklot_preload_active") != nullptr;
  std::printf("preload shim: %s\n", shim ? "active" : "not loaded");
  return 0;
}
