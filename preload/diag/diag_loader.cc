// Loading the diagnostics object (preload/diag/diag.h), and the shim's side of
// PARKLOT_DEADLOCK (deadlock.h).
//
// Where it is found: beside the shim's own file, the path dladdr gives for
// the shim with symbolic links resolved, never through a search
// (LD_LIBRARY_PATH, RUNPATH, the program's dlopen search): the shim loads
// the file that was installed with it, or nothing. In secure mode no knob is
// read (runtime/config.h), so nothing asks for it and it is never loaded;
// LoadDiagnostics checks again. It is loaded in the shim's constructor,
// before main, so its opens and mmaps happen before any sandbox the program
// installs (docs/design.md section 6, invariant 9), and only in a process whose
// environment asked for a diagnostic.
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "preload/diag/deadlock.h"
#include "preload/diag/diag.h"
#include "preload/diag/report.h"
#include "preload/shim.h"
#include "runtime/fork.h"
#include "runtime/thread_data.h"

namespace parklot::internal::preload {

DiagHooks g_diag;

namespace {

char g_unavailable[PATH_MAX + 256] = "not asked for";
bool g_loaded = false;
bool g_tried = false;  // loaded once at most, tried once at most

bool HostThread(uint32_t* index, uint32_t* slot) {
  ThreadData* td = CurrentThreadData();
  // Past its exit hook the thread gave its registry index back; another
  // thread's records may be there now. Index 0: it runs without one
  // (registry.cc RegisterCurrentThread), and records by index would mix it
  // with every other such thread.
  if (td->exited || td->index == 0) return false;
  *index = td->index;
  *slot = td->slot;
  return true;
}

ForkHandlers g_fork_step;
DiagHost g_host;  // the object keeps a pointer to it

void HostForkStep(bool (*prepare)(), void (*parent)(), void (*child)()) {
  g_fork_step.prepare = prepare;
  g_fork_step.parent = parent;
  g_fork_step.child = child;
  RegisterForkStep(ForkStep::kDeadlockGraph, &g_fork_step);
}

void HostReport(const char* text, size_t size) {
  WriteReport(Sink::kReport, std::string_view(text, size));
}

// kDiagFileName in the directory of the shim's file; false if that path
// cannot be had.
bool DiagPath(char* out, size_t size, const void** shim_base) {
  Dl_info info;
  if (dladdr(reinterpret_cast<const void*>(&DiagPath), &info) == 0 ||
      info.dli_fname == nullptr || info.dli_fname[0] == '\0') {
    return false;
  }
  *shim_base = info.dli_fbase;
  char real[PATH_MAX];
  // A symbolic link to the shim (a runfiles tree, a link in /usr/local/lib)
  // leads to the directory the shim was installed in.
  const char* self = realpath(info.dli_fname, real) != nullptr ? real : info.dli_fname;
  const char* slash = strrchr(self, '/');
  const size_t dir = slash != nullptr ? static_cast<size_t>(slash - self) + 1 : 0;
  TextBuffer path(out, size);
  path.Add("%.*s%s", static_cast<int>(dir), self, kDiagFileName);
  return path.wanted() < size;
}

}  // namespace

bool LoadDiagnostics() {
  if (g_tried) return g_loaded;
  g_tried = true;
  if (SecureMode()) return false;
  char path[PATH_MAX];
  const void* shim_base = nullptr;
  TextBuffer why(g_unavailable, sizeof(g_unavailable));
  if (!DiagPath(path, sizeof(path), &shim_base)) {
    why.Add("the shim's own path is unknown");
    return false;
  }
  // glibc's dlopen (the shim's own would run its RTLD_DEEPBIND checks).
  // Local: its symbols and those of its libraries stay out of the global
  // scope the program's lookups search; kept loaded for the process's life.
  void* handle = RealGlibc().dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* err = dlerror();  // read, so the program's dlerror() is clear
    why.Add("%s did not load: %s", path, err != nullptr ? err : "?");
    return false;
  }
  using Open = int (*)(uint32_t, const DiagHost*, DiagHooks*);
  const auto open = reinterpret_cast<Open>(dlsym(handle, "parklot_diag_open"));
  if (open == nullptr) dlerror();
  g_host = DiagHost{HostThread, CurrentTid,       HostForkStep,
                    HostReport, DescribeCallSite, shim_base};
  DiagHooks hooks{};
  if (open == nullptr || open(kDiagVersion, &g_host, &hooks) != 0) {
    why.Add("%s is not this shim's (another build or version)", path);
    return false;
  }
  g_diag = hooks;
  g_loaded = true;
  return true;
}

const char* DiagnosticsUnavailable() { return g_loaded ? nullptr : g_unavailable; }

void EnableDeadlockDetection(const Config& config) {
  if (!LoadDiagnostics()) {
    char line[sizeof(g_unavailable) + 96];
    TextBuffer text(line, sizeof(line));
    text.Add("parklot: PARKLOT_DEADLOCK needs %s, beside the shim: %s; "
             "detection off\n",
             kDiagFileName, g_unavailable);
    WriteReport(Sink::kReport, text.view());
    return;
  }
  if (g_diag.deadlock_enable(config.deadlock == DeadlockMode::kAbort)) {
    SetLockHooks(kHookDeadlock);
  }
}

Deadline DeadlockSlice(const Deadline& user, bool* is_user) {
  *is_user = false;
  const Deadline check = Deadline::InNanos(kDeadlockCheckAfterNs);
  if (user.is_never()) return check;
  if (user.ns <= SaturatingAdd(ClockNanos(user.clock), kDeadlockCheckAfterNs)) {
    *is_user = true;
    return user;
  }
  return check;
}

}  // namespace parklot::internal::preload
