// Names for the reports (diag.h: DiagHooks::name_lock, ::describe_line): a
// lock in static storage by its symbol, as gdb's `info symbol` names it
// (`hot_lock`, `table+0x40`), and a call site by its source line where the
// program has DWARF line information (`file.c:123 function`). Both through
// elfutils' libdwfl over this process's own maps, which reads the symbol
// tables (.symtab where present, else .dynsym; separate debug files too)
// and line tables. libdw is this object's dependency, never the shim's.
//
// libdwfl allocates and opens files, and is not thread-safe: one lookup at
// a time, under g_names_mu, and only when a report is written (never on a
// lock path). A failed lookup (no memory, a sandbox that forbids the opens)
// leaves the caller to its fallback, the address or FUNCTION+0xOFF.
#include <elfutils/libdwfl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cxxabi.h>

#include "absl/base/internal/spinlock.h"
#include "preload/diag/data_symbol.h"
#include "preload/diag/diag.h"

namespace parklot::internal::preload {
namespace {

using absl::base_internal::SpinLock;
using absl::base_internal::SpinLockHolder;

ABSL_CONST_INIT SpinLock g_names_mu(absl::kConstInit,
                                    absl::base_internal::SCHEDULE_KERNEL_ONLY);
Dwfl* g_dwfl = nullptr;  // guarded by g_names_mu
char* g_debuginfo_path = nullptr;
const Dwfl_Callbacks kCallbacks = {dwfl_linux_proc_find_elf,
                                   dwfl_standard_find_debuginfo, nullptr,
                                   &g_debuginfo_path};

// (Re)reads the process's modules: objects dlopen'ed since the last
// report are then known too. Under g_names_mu.
bool Report() {
  if (g_dwfl == nullptr && (g_dwfl = dwfl_begin(&kCallbacks)) == nullptr) {
    return false;
  }
  dwfl_report_begin(g_dwfl);
  const int err = dwfl_linux_proc_report(g_dwfl, getpid());
  return dwfl_report_end(g_dwfl, nullptr, nullptr) == 0 && err == 0;
}

// Whether libdw has room to work: it reads whole symbol tables and DWARF
// units into memory and does not survive an allocation that fails (a
// SIGSEGV inside libdw-0.188 with the address space exhausted, seen under
// //tests/preload:config_env_test). A report written when a probe of
// kNamingRoom bytes of address space cannot be reserved keeps addresses.
constexpr size_t kNamingRoom = size_t{64} << 20;
bool RoomToName() {
  void* p = mmap(nullptr, kNamingRoom, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  munmap(p, kNamingRoom);
  return true;
}

// The module holding `addr`; the modules are read again once on a miss.
// nullptr where there is no room to look (RoomToName). Under g_names_mu.
Dwfl_Module* ModuleOf(uintptr_t addr) {
  if (!RoomToName()) return nullptr;
  if (g_dwfl == nullptr && !Report()) return nullptr;
  Dwfl_Module* m = dwfl_addrmodule(g_dwfl, addr);
  if (m == nullptr && Report()) m = dwfl_addrmodule(g_dwfl, addr);
  return m;
}

// `name` demangled into buf (a C name as it is).
void Demangled(const char* name, char* buf, size_t size) {
  int status = -1;
  char* d = name[0] == '_' && name[1] == 'Z'
                ? abi::__cxa_demangle(name, nullptr, nullptr, &status)
                : nullptr;
  snprintf(buf, size, "%s", status == 0 && d != nullptr ? d : name);
  free(d);
}

bool NameLock(uintptr_t addr, char* buf, size_t size) {
  SpinLockHolder h(&g_names_mu);
  Dwfl_Module* m = ModuleOf(addr);
  if (m == nullptr) return false;  // heap, stack, anonymous memory
  uint64_t off = 0;
  const char* name = diag::DataSymbolAt(m, addr, &off);
  if (name == nullptr) return false;
  char plain[256];
  Demangled(name, plain, sizeof(plain));
  if (off == 0) {
    snprintf(buf, size, "%s", plain);
  } else {
    snprintf(buf, size, "%s+%#lx", plain, static_cast<unsigned long>(off));
  }
  return true;
}

bool DescribeLine(uintptr_t pc, char* buf, size_t size) {
  SpinLockHolder h(&g_names_mu);
  Dwfl_Module* m = ModuleOf(pc);
  if (m == nullptr) return false;
  Dwfl_Line* line = dwfl_module_getsrc(m, pc);
  int lineno = 0;
  const char* file = line != nullptr
                         ? dwfl_lineinfo(line, nullptr, &lineno, nullptr,
                                         nullptr, nullptr)
                         : nullptr;
  const char* function = dwfl_module_addrname(m, pc);
  if (file == nullptr || lineno <= 0 || function == nullptr) return false;
  // The file's base name, as a report line has room for (addr2line on the
  // MODULE+0xADDR beside it gives the path).
  const char* slash = strrchr(file, '/');
  char plain[512];
  Demangled(function, plain, sizeof(plain));
  snprintf(buf, size, "%s:%d %s", slash != nullptr ? slash + 1 : file, lineno,
           plain);
  return true;
}

}  // namespace

void InstallNameHooks(DiagHooks* hooks) {
  hooks->name_lock = NameLock;
  hooks->describe_line = DescribeLine;
}

}  // namespace parklot::internal::preload
