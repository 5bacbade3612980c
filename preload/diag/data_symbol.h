// The name of a data address as gdb's `info symbol` gives it (`hot_lock`,
// `table+0x40`), from a module elfutils' libdwfl reported: shared by the
// diagnostics object's reports (names.cc) and `parklot top`, which read
// the same symbol tables in and out of the process.
#ifndef PARKLOT_PRELOAD_DIAG_DATA_SYMBOL_H_
#define PARKLOT_PRELOAD_DIAG_DATA_SYMBOL_H_

#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdint.h>

namespace parklot::internal::diag {

// The data symbol (STT_OBJECT) of module `m` that `addr` lies inside, and
// the offset into it; nullptr where there is none (code, or an address
// past a sized symbol: gdb names neither). The name is the module's, as
// stored (mangled for C++).
inline const char* DataSymbolAt(Dwfl_Module* m, uintptr_t addr,
                                uint64_t* offset) {
  GElf_Off off = 0;
  GElf_Sym sym;
  const char* name =
      dwfl_module_addrinfo(m, addr, &off, &sym, nullptr, nullptr, nullptr);
  if (name == nullptr || GELF_ST_TYPE(sym.st_info) != STT_OBJECT ||
      (sym.st_size != 0 ? off >= sym.st_size : off != 0)) {
    return nullptr;
  }
  *offset = off;
  return name;
}

}  // namespace parklot::internal::diag

#endif  // PARKLOT_PRELOAD_DIAG_DATA_SYMBOL_H_
