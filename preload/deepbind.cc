// dlopen with RTLD_DEEPBIND. Such an object looks its symbols up in its own
// scope (itself, then its dependencies, libc among them) before the global
// one, where the preloaded shim sits; its pthread_mutex_lock and the rest
// bind to glibc's, and glibc's and the shim's operations on one mutex (the
// program passes the object its locks, or the object's locks are the
// program's) do not know each other's lock words: both sides hang.
//
// The shim exports dlopen and dlmopen. Without the flag (and while no
// DEEPBIND load has happened) they jump to glibc's with the caller's frame
// intact. Otherwise glibc's is called with a return address inside the
// caller's object (a `ret` byte of its code, which returns to the shim), so
// glibc still picks the caller's $ORIGIN, RUNPATH and namespace and does
// its whole search itself (sonames, RTLD_NOLOAD, wrong-class files). After
// the load the shim points, in the handle's object and the objects loaded
// with it, the GOT entries (and text relocations) of the functions the
// global scope finds in the shim at what that lookup gives, when and only
// when they still hold glibc's function (or an unresolved lazy PLT entry):
// an object's own definitions, and pointers a constructor or another
// library stored, stay. The objects' constructors have run by then, against
// glibc's functions.
//
// Thread safety: the rebinding runs inside dl_iterate_phdr, under the
// loader's own write lock, so no object it reads is unmapped meanwhile and
// rebindings never overlap; it calls nothing that takes the loader's main
// lock (lookups are made before). Every slow-path dlopen repeats it for the
// handle it returns (it changes nothing the second time), so a thread that
// gets a handle another thread is still rebinding waits for that lock and
// returns only once the rebinding is done. Under a shadow stack the `ret`
// trick would fault: glibc is then called from the shim, which it sees as
// the caller.
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "preload/call_as.h"
#include "preload/shim.h"
#include "preload/symbol_versions.h"
#include "sync/once.h"

extern "C" {
// Set at the first DEEPBIND dlopen; from then on the stubs take the slow
// path for every base-namespace load (see the thread-safety note).
__attribute__((visibility("hidden"))) unsigned char parklot_deepbind_used = 0;
}

namespace parklot::internal::preload {
namespace {

uintptr_t PageSize() { return static_cast<uintptr_t>(getpagesize()); }

// A growable array on malloc, freed by its owner (Free()): this slow path
// allocates as glibc's dlopen itself does, and std::vector would need
// libstdc++'s out-of-line throw helpers in a shim that loads with libc
// alone. An element that finds no memory is left out: that function or
// object stays as glibc bound it.
template <typename T>
class List {
  static_assert(std::is_trivially_copyable_v<T>, "copied with realloc");

 public:
  void Add(const T& v) {
    if (size_ == capacity_) {
      const size_t grown = capacity_ == 0 ? 16 : capacity_ * 2;
      T* p = static_cast<T*>(realloc(data_, grown * sizeof(T)));
      if (p == nullptr) return;
      data_ = p;
      capacity_ = grown;
    }
    data_[size_++] = v;
  }
  void Free() {
    free(data_);
    data_ = nullptr;
    size_ = capacity_ = 0;
  }
  T* begin() const { return data_; }
  T* end() const { return data_ + size_; }
  size_t size() const { return size_; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  T* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// The absolute address of a dynamic-section pointer: glibc relocates them
// in place, except in read-only dynamic sections.
uintptr_t DynPtr(const link_map* m, uintptr_t p) {
  return p < m->l_addr ? p + m->l_addr : p;
}

// The string `tag` names in `m`'s dynamic section (DT_SONAME, ...), or for
// DT_STRTAB the string table itself; null if absent.
const char* DynString(const link_map* m, ElfW(Sxword) tag) {
  const char* strtab = nullptr;
  uintptr_t offset = 0;
  bool found = false;
  for (const ElfW(Dyn)* d = m->l_ld; d != nullptr && d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_STRTAB) {
      strtab = reinterpret_cast<const char*>(DynPtr(m, d->d_un.d_ptr));
    }
    if (d->d_tag == tag) {
      offset = d->d_un.d_val;
      found = true;
    }
  }
  if (tag == DT_STRTAB) return strtab;
  return found && strtab != nullptr ? strtab + offset : nullptr;
}

// A function the global scope finds in the shim, with what that lookup
// gives (the shim's, or a non-PIE program's PLT entry that leads to it).
struct Served {
  const char* name;
  uintptr_t target;
};

bool ByName(const Served& a, const Served& b) {
  return strcmp(a.name, b.name) < 0;
}

// The number of symbols in a DT_GNU_HASH table.
size_t GnuHashSymbols(const uint32_t* h) {
  const uint32_t nbuckets = h[0], symoffset = h[1], bloom = h[2];
  const uint32_t* buckets = h + 4 + bloom * (sizeof(ElfW(Addr)) / 4);
  const uint32_t* chain = buckets + nbuckets;
  uint32_t last = 0;
  for (uint32_t i = 0; i < nbuckets; ++i) last = std::max(last, buckets[i]);
  if (last < symoffset) return symoffset;
  while ((chain[last - symoffset] & 1) == 0) ++last;
  return last + 1;
}

// The shim's exported functions that the global scope binds to it. Built
// once, before glibc's dlopen is called (dlsym takes the loader's lock and
// sets dlerror, which the program reads after dlopen).
List<Served> BuildServed() {
  List<Served> out;
  Dl_info info;
  link_map* shim = nullptr;
  if (dladdr1(reinterpret_cast<const void*>(&BuildServed), &info,
              reinterpret_cast<void**>(&shim), RTLD_DL_LINKMAP) == 0 ||
      shim == nullptr) {
    return out;
  }
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const uint32_t* gnu_hash = nullptr;
  for (const ElfW(Dyn)* d = shim->l_ld; d->d_tag != DT_NULL; ++d) {
    const uintptr_t p = DynPtr(shim, d->d_un.d_ptr);
    if (d->d_tag == DT_SYMTAB) symtab = reinterpret_cast<const ElfW(Sym)*>(p);
    if (d->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char*>(p);
    if (d->d_tag == DT_GNU_HASH) gnu_hash = reinterpret_cast<const uint32_t*>(p);
  }
  if (symtab == nullptr || strtab == nullptr || gnu_hash == nullptr) return out;
  const size_t n = GnuHashSymbols(gnu_hash);
  for (size_t i = 1; i < n; ++i) {
    const ElfW(Sym)& s = symtab[i];
    if (s.st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s.st_info) != STT_FUNC ||
        ELF64_ST_BIND(s.st_info) == STB_LOCAL) {
      continue;
    }
    const char* name = strtab + s.st_name;
    const uintptr_t own = shim->l_addr + s.st_value;
    const uintptr_t global =
        reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, name));
    bool keep = global == own;
    if (!keep && global != 0) {
      // A non-PIE program that takes the function's address defines it as
      // its PLT entry (an undefined symbol with a value): pointers compare
      // equal to the program's, calls reach the shim through the program's
      // GOT.
      Dl_info at;
      link_map* lm = nullptr;
      ElfW(Sym)* sym = nullptr;
      void* p = reinterpret_cast<void*>(global);
      keep = dladdr1(p, &at, reinterpret_cast<void**>(&lm), RTLD_DL_LINKMAP) !=
                 0 &&
             lm != nullptr && lm->l_prev == nullptr &&
             dladdr1(p, &at, reinterpret_cast<void**>(&sym), RTLD_DL_SYMENT) !=
                 0 &&
             sym != nullptr && sym->st_shndx == SHN_UNDEF &&
             at.dli_sname != nullptr && strcmp(at.dli_sname, name) == 0;
    }
    if (keep) out.Add({name, global});
  }
  std::sort(out.begin(), out.end(), ByName);
  return out;
}

// Built by the first slow-path dlopen, kept for the process's life.
Once g_served_once;
List<Served> g_served;

const List<Served>& ServedFunctions() {
  g_served_once.Call([] { g_served = BuildServed(); });
  return g_served;
}

const Served* FindServed(const List<Served>& served, const char* name) {
  const Served key{name, 0};
  auto it = std::lower_bound(served.begin(), served.end(), key, ByName);
  return it != served.end() && strcmp(it->name, name) == 0 ? &*it : nullptr;
}

// An object as dl_iterate_phdr shows it.
struct Object {
  uintptr_t addr;
  const char* name;  // glibc's l_name: identifies the link_map
  const ElfW(Phdr)* phdr;
  int phnum;
};

bool Contains(const Object& o, uintptr_t p, uint32_t need_flags) {
  for (int i = 0; i < o.phnum; ++i) {
    const ElfW(Phdr)& ph = o.phdr[i];
    if (ph.p_type == PT_LOAD && (ph.p_flags & need_flags) == need_flags &&
        p >= o.addr + ph.p_vaddr && p < o.addr + ph.p_vaddr + ph.p_memsz) {
      return true;
    }
  }
  return false;
}

Object ToObject(const dl_phdr_info* info) {
  return {info->dlpi_addr, info->dlpi_name, info->dlpi_phdr, info->dlpi_phnum};
}

// The return gadget (call_as.h) in the code of the object glibc will take
// for the caller's: the one holding `caller`, else (code outside every
// object) the main program, listed first. Its address is 0 if none.
ReturnGadget GadgetFor(const void* caller) {
  struct Pick {
    uintptr_t caller;
    ReturnGadget main_gadget, caller_gadget;
    bool first = true, found = false;
  } p{reinterpret_cast<uintptr_t>(caller), {}, {}};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* arg) {
        auto* p = static_cast<Pick*>(arg);
        const Object o = ToObject(info);
        if (p->first) p->main_gadget = FindReturnGadget(o.addr, o.phdr, o.phnum);
        p->first = false;
        if (!Contains(o, p->caller, 0)) return 0;
        p->caller_gadget = FindReturnGadget(o.addr, o.phdr, o.phnum);
        p->found = true;
        return 1;
      },
      &p);
  return p.found ? p.caller_gadget : p.main_gadget;
}

// Whether the lazy PLT slot `index` still holds its unresolved value, the
// address of its entry's `push $index` (after an endbr64 in IBT PLTs).
bool UnresolvedLazy(const Object& o, uintptr_t value, size_t index) {
  if (!Contains(o, value, PF_X | PF_R) || !Contains(o, value + 9, PF_X | PF_R)) {
    return false;
  }
  const auto* code = reinterpret_cast<const unsigned char*>(value);
  static const unsigned char kEndbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
  if (memcmp(code, kEndbr64, 4) == 0) code += 4;
  uint32_t pushed;
  memcpy(&pushed, code + 1, 4);
  return code[0] == 0x68 && pushed == index;
}

// Stores `value` at `slot` in `o`. A page the loader left without write
// access (RELRO, or code with text relocations) is opened for the store
// alone and given back exactly its protection: RELRO as glibc rounds it
// (whole pages inside the segment), else its segment's.
void WriteSlot(const Object& o, uintptr_t slot, uintptr_t value) {
  const uintptr_t page = slot & ~(PageSize() - 1);
  int prot = -1;
  for (int i = 0; i < o.phnum; ++i) {
    const ElfW(Phdr)& ph = o.phdr[i];
    const uintptr_t start = o.addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && slot >= start && slot < start + ph.p_memsz) {
      prot = ((ph.p_flags & PF_R) ? PROT_READ : 0) |
             ((ph.p_flags & PF_W) ? PROT_WRITE : 0) |
             ((ph.p_flags & PF_X) ? PROT_EXEC : 0);
    }
  }
  for (int i = 0; i < o.phnum; ++i) {
    const ElfW(Phdr)& ph = o.phdr[i];
    const uintptr_t start = (o.addr + ph.p_vaddr) & ~(PageSize() - 1);
    const uintptr_t end = (o.addr + ph.p_vaddr + ph.p_memsz) & ~(PageSize() - 1);
    if (ph.p_type == PT_GNU_RELRO && slot >= start && slot < end) prot = PROT_READ;
  }
  if (prot < 0) return;
  void* p = reinterpret_cast<void*>(page);
  if ((prot & PROT_WRITE) == 0 && mprotect(p, PageSize(), prot | PROT_WRITE) != 0) {
    return;
  }
  __atomic_store_n(reinterpret_cast<uintptr_t*>(slot), value, __ATOMIC_RELEASE);
  if ((prot & PROT_WRITE) == 0) mprotect(p, PageSize(), prot);
}

// Points `o`'s slots for served functions that still hold glibc's function
// (an address in libc) or an unresolved lazy entry at the served target.
void RebindObject(const link_map* m, const Object& o, const Object& libc,
                  const List<Served>& served) {
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const ElfW(Rela)* tables[2] = {nullptr, nullptr};
  size_t sizes[2] = {0, 0};
  for (const ElfW(Dyn)* d = m->l_ld; d != nullptr && d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        symtab = reinterpret_cast<const ElfW(Sym)*>(DynPtr(m, d->d_un.d_ptr));
        break;
      case DT_STRTAB:
        strtab = reinterpret_cast<const char*>(DynPtr(m, d->d_un.d_ptr));
        break;
      case DT_JMPREL:
        tables[0] = reinterpret_cast<const ElfW(Rela)*>(DynPtr(m, d->d_un.d_ptr));
        break;
      case DT_PLTRELSZ: sizes[0] = d->d_un.d_val; break;
      case DT_RELA:
        tables[1] = reinterpret_cast<const ElfW(Rela)*>(DynPtr(m, d->d_un.d_ptr));
        break;
      case DT_RELASZ: sizes[1] = d->d_un.d_val; break;
    }
  }
  if (symtab == nullptr || strtab == nullptr) return;
  for (int t = 0; t < 2; ++t) {
    if (tables[t] == nullptr) continue;
    for (size_t i = 0; i < sizes[t] / sizeof(ElfW(Rela)); ++i) {
      const ElfW(Rela)& r = tables[t][i];
      const uint32_t type = ELF64_R_TYPE(r.r_info);
      if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT &&
          !(type == R_X86_64_64 && r.r_addend == 0)) {
        continue;
      }
      const ElfW(Sym)& sym = symtab[ELF64_R_SYM(r.r_info)];
      const int sym_type = ELF64_ST_TYPE(sym.st_info);
      if (sym.st_name == 0 || sym.st_shndx != SHN_UNDEF ||
          (sym_type != STT_FUNC && sym_type != STT_NOTYPE)) {
        continue;
      }
      const Served* s = FindServed(served, strtab + sym.st_name);
      if (s == nullptr) continue;
      const uintptr_t slot = m->l_addr + r.r_offset;
      const uintptr_t value = *reinterpret_cast<const uintptr_t*>(slot);
      if (value == s->target) continue;
      if (Contains(libc, value, 0) ||
          (type == R_X86_64_JUMP_SLOT && UnresolvedLazy(o, value, i))) {
        WriteSlot(o, slot, s->target);
      }
    }
  }
}

// Whether `m` is the object glibc finds for the needed name `name`.
bool NameMatches(const link_map* m, const char* name) {
  if (m->l_name == nullptr) return false;
  const char* base = strrchr(m->l_name, '/');
  base = base != nullptr ? base + 1 : m->l_name;
  const char* soname = DynString(m, DT_SONAME);
  return strcmp(m->l_name, name) == 0 || strcmp(base, name) == 0 ||
         (soname != nullptr && strcmp(soname, name) == 0);
}

struct RebindJob {
  link_map* handle;
  const List<Object>* objects;
  const Object* libc;
  uintptr_t shim_addr;
  const List<Served>* served;
};

const Object* Find(const List<Object>& objects, const link_map* m) {
  for (const Object& o : objects) {
    if (o.addr == m->l_addr && o.name == m->l_name) return &o;
  }
  return nullptr;
}

// The rebinding proper, inside dl_iterate_phdr (the loader's write lock
// held: the lists do not change, nothing listed is unmapped). The handle's
// object and those after it that glibc loaded as its dependencies: glibc
// loads one dlopen's objects together under its lock, appending them in
// order, each the first match of a DT_NEEDED name of one before it.
int RebindLocked(dl_phdr_info*, size_t, void* arg) {
  const auto* job = static_cast<const RebindJob*>(arg);
  const link_map* head = job->handle;
  while (head->l_prev != nullptr) head = head->l_prev;
  List<const link_map*> run;
  run.Add(job->handle);
  for (const link_map* m = job->handle->l_next; m != nullptr; m = m->l_next) {
    bool needed = false;
    for (size_t k = 0; k < run.size() && !needed; ++k) {
      const link_map* user = run[k];
      const char* strtab = DynString(user, DT_STRTAB);
      for (const ElfW(Dyn)* d = user->l_ld; d != nullptr && d->d_tag != DT_NULL;
           ++d) {
        if (d->d_tag != DT_NEEDED || strtab == nullptr) continue;
        const char* name = strtab + d->d_un.d_val;
        const link_map* first = head;
        while (first != nullptr && !NameMatches(first, name)) first = first->l_next;
        if (first == m) {
          needed = true;
          break;
        }
      }
    }
    if (!needed) break;
    run.Add(m);
  }
  for (const link_map* m : run) {
    const Object* o = Find(*job->objects, m);
    if (o == nullptr || o->addr == job->libc->addr || o->addr == job->shim_addr) {
      continue;
    }
    RebindObject(m, *o, *job->libc, *job->served);
  }
  run.Free();
  return 1;
}

void Rebind(link_map* handle, const List<Served>& served) {
  struct Collect {
    List<Object> objects;
    uintptr_t libc_fn, shim_fn;
    Object libc{}, shim{};
  } c;
  c.libc_fn = reinterpret_cast<uintptr_t>(RealGlibc().pthread_mutex_lock);
  c.shim_fn = reinterpret_cast<uintptr_t>(&Rebind);
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* arg) {
        auto* c = static_cast<Collect*>(arg);
        const Object o = ToObject(info);
        c->objects.Add(o);
        if (Contains(o, c->libc_fn, 0)) c->libc = o;
        if (Contains(o, c->shim_fn, 0)) c->shim = o;
        return 0;
      },
      &c);
  if (c.libc.phdr != nullptr && c.shim.phdr != nullptr) {
    RebindJob job{handle, &c.objects, &c.libc, c.shim.addr, &served};
    dl_iterate_phdr(RebindLocked, &job);
  }
  c.objects.Free();
}

}  // namespace
}  // namespace parklot::internal::preload

extern "C" {
// glibc's functions for the stubs below, which cannot call RealGlibc(): set
// at the first call (dlopen may come before the shim's constructor, from
// another preloaded library's).
__attribute__((visibility("hidden"))) void* (*parklot_glibc_dlopen)(const char*,
                                                                   int) = nullptr;
__attribute__((visibility("hidden"))) void* (*parklot_glibc_dlmopen)(
    Lmid_t, const char*, int) = nullptr;

__attribute__((visibility("hidden"))) void ParklotResolveDlopen() {
  const auto& g = parklot::internal::preload::RealGlibc();
  __atomic_store_n(&parklot_glibc_dlmopen, g.dlmopen, __ATOMIC_RELEASE);
  __atomic_store_n(&parklot_glibc_dlopen, g.dlopen, __ATOMIC_RELEASE);
}

// glibc's dlopen (`dlmopen`: dlmopen(lmid, ...)) called for `caller` (the
// program's return address), then the rebinding.
__attribute__((visibility("hidden"))) void* ParklotOpenSlow(
    const char* file, int flags, const void* caller, Lmid_t lmid, bool dlmopen) {
  using namespace parklot::internal::preload;
  // Under Valgrind every served name is glibc's (surface.h): a library
  // bound to glibc's functions is bound as it should be, nothing to rebind.
  const bool rebind = !SteppingAside();
  if ((flags & RTLD_DEEPBIND) != 0 && rebind) {
    __atomic_store_n(&parklot_deepbind_used, 1, __ATOMIC_RELAXED);
  }
  // Built before glibc's dlopen runs (BuildServed says why).
  const List<Served>* served = rebind ? &ServedFunctions() : nullptr;
  const void* fn = dlmopen ? reinterpret_cast<const void*>(RealGlibc().dlmopen)
                           : reinterpret_cast<const void*>(RealGlibc().dlopen);
  const uintptr_t a = dlmopen ? static_cast<uintptr_t>(lmid)
                              : reinterpret_cast<uintptr_t>(file);
  const uintptr_t b = dlmopen ? reinterpret_cast<uintptr_t>(file)
                              : static_cast<uintptr_t>(flags);
  const uintptr_t c = static_cast<uintptr_t>(flags);
  const ReturnGadget gadget =
      ParklotShadowStack() == 0 ? GadgetFor(caller) : ReturnGadget{};
  void* handle;
  if (gadget.address != 0) {
    handle = ParklotCallAs(fn, a, b, c, gadget.address, gadget.saves);
  } else if (dlmopen) {
    handle = RealGlibc().dlmopen(lmid, file, flags);
  } else {
    handle = RealGlibc().dlopen(file, flags);
  }
  if (handle == nullptr || file == nullptr || !rebind) return handle;
  const int saved_errno = errno;
  Rebind(static_cast<link_map*>(handle), *served);
  errno = saved_errno;
  return handle;
}

__attribute__((visibility("hidden"))) void* ParklotDlopenSlow(const char* file,
                                                             int flags,
                                                             const void* caller) {
  return ParklotOpenSlow(file, flags, caller, LM_ID_BASE, false);
}

__attribute__((visibility("hidden"))) void* ParklotDlmopenSlow(
    Lmid_t lmid, const char* file, int flags, const void* caller) {
  return ParklotOpenSlow(file, flags, caller, lmid, true);
}
}

static_assert(RTLD_DEEPBIND == 8, "the dlopen stubs test bit 3");
static_assert(LM_ID_BASE == 0, "the dlmopen stub tests for 0");

// The exported dlopen and dlmopen: a jump to glibc's (so glibc sees the
// program's return address) unless the flag is given or a DEEPBIND load
// happened before, and for dlmopen the namespace is the base one (others
// hold no shim); else the slow path above with the return address as the
// caller. ParklotCallAs pushes its continuation and then `gadget` as the
// return address: glibc returns to the gadget, whose `ret` returns to the
// continuation.
asm(R"(
  .text
  .globl dlopen
  .type dlopen, @function
  .p2align 4
dlopen:
  .cfi_startproc
  endbr64
.Ldlopen_again:
  test $8, %esi
  jnz 1f
  cmpb $0, parklot_deepbind_used(%rip)
  jne 1f
  mov parklot_glibc_dlopen(%rip), %rax
  test %rax, %rax
  jz 2f
  jmp *%rax
1:
  mov (%rsp), %rdx
  jmp ParklotDlopenSlow
2:
  push %rdi
  .cfi_adjust_cfa_offset 8
  push %rsi
  .cfi_adjust_cfa_offset 8
  sub $8, %rsp
  .cfi_adjust_cfa_offset 8
  call ParklotResolveDlopen
  add $8, %rsp
  .cfi_adjust_cfa_offset -8
  pop %rsi
  .cfi_adjust_cfa_offset -8
  pop %rdi
  .cfi_adjust_cfa_offset -8
  jmp .Ldlopen_again
  .cfi_endproc
  .size dlopen, .-dlopen

  .globl dlmopen
  .type dlmopen, @function
  .p2align 4
dlmopen:
  .cfi_startproc
  endbr64
.Ldlmopen_again:
  test %rdi, %rdi
  jnz 3f
  test $8, %edx
  jnz 1f
  cmpb $0, parklot_deepbind_used(%rip)
  jne 1f
3:
  mov parklot_glibc_dlmopen(%rip), %rax
  test %rax, %rax
  jz 2f
  jmp *%rax
1:
  mov (%rsp), %rcx
  jmp ParklotDlmopenSlow
2:
  push %rdi
  .cfi_adjust_cfa_offset 8
  push %rsi
  .cfi_adjust_cfa_offset 8
  push %rdx
  .cfi_adjust_cfa_offset 8
  call ParklotResolveDlopen
  pop %rdx
  .cfi_adjust_cfa_offset -8
  pop %rsi
  .cfi_adjust_cfa_offset -8
  pop %rdi
  .cfi_adjust_cfa_offset -8
  jmp .Ldlmopen_again
  .cfi_endproc
  .size dlmopen, .-dlmopen

)");

// glibc's symbol versions (symbol_versions.h).
PARKLOT_VERSIONS_DEEPBIND;
