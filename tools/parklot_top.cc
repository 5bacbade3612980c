// `parklot top [--once] PID`: a live view of a running process under the
// shim, from another terminal: every thread parked now, on which lock
// (named by its symbol), since when, held by which thread, and the
// wait-for cycles among them. Refreshed every second; --once prints one
// screen and exits.
//
// The process is neither stopped nor asked anything: the shim exports
// parklot_debug_info (preload/debug_info.cc, layout version 3), and this
// reads it and the state it describes with process_vm_readv, under the
// same permission rule as `gdb -p` (the same user, or CAP_SYS_PTRACE). The
// shim opens, maps and calls nothing for it. Without ptrace no thread's
// %fs_base can be read, so the threads are found through the shim's
// registry (runtime/registry.h), whose address the debug info gives: each
// registered thread's data, and from it, at the fixed TLS offset the debug
// info also gives, glibc's thread descriptor, whose tid field glibc
// describes for libthread_db (`_thread_db_pthread_tid` in libc.so.6).
// The shim and libc are found in /proc/PID/maps, their symbols in their ELF
// symbol tables (plus the load bias), and so are the locks' names: all
// through elfutils' libdwfl. docs/design.md §5.17, docs/diagnostics.md.
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "preload/diag/data_symbol.h"

namespace {

constexpr uint32_t kMagic = 0x544c4b50;  // "PKLT"
constexpr uint32_t kVersion = 3;

// parklot_debug_info, layout version 3 (preload/debug_info.cc).
struct DebugInfo {
  uint32_t magic, version;
  int64_t data_tls_offset;
  uint32_t record_pointer_offset, key_offset, parker_offset, parker_queued;
  uint32_t slot_offset, mutex_slot_offset, mutex_locked_max;
  uint32_t rwlock_writer_bit, rwlock_slot_shift, rwlock_slot_bits;
  uint32_t parked_since_offset, own_record_offset;
  uint64_t registry_chunks, registry_highest;
  uint32_t registry_chunk_count, registry_chunk_slots, registry_by_index_offset;
  uint32_t reserved;
};
static_assert(sizeof(DebugInfo) == 96, "the shim's layout");

pid_t g_pid;
std::string g_comm;

[[noreturn]] void Fail(const std::string& why) {
  fprintf(stderr, "parklot top: %s\n", why.c_str());
  exit(1);
}

std::string Pid() {
  return "pid " + std::to_string(g_pid) +
         (g_comm.empty() ? "" : " (" + g_comm + ")");
}

// The one-line error for a failed access to the process (errno `err`).
[[noreturn]] void FailAccess(int err) {
  if (err == ESRCH || err == ENOENT) Fail(Pid() + ": no such process (gone)");
  if (err == EPERM || err == EACCES) {
    Fail(Pid() + ": no permission to read its memory (as for gdb -p: run as "
                 "its user, or with CAP_SYS_PTRACE)");
  }
  Fail(Pid() + ": cannot read its memory: " + strerror(err));
}

// Reads `size` bytes at `addr` in the process; false (errno set) if it
// could not. A partial read is a failure: the memory went away under us.
bool Read(uint64_t addr, void* out, size_t size) {
  iovec local{out, size};
  iovec remote{reinterpret_cast<void*>(addr), size};
  const ssize_t n = process_vm_readv(g_pid, &local, 1, &remote, 1, 0);
  if (n == static_cast<ssize_t>(size)) return true;
  if (n >= 0) errno = EFAULT;
  return false;
}

template <typename T>
T ReadOr(uint64_t addr, T fallback) {
  T v;
  return Read(addr, &v, sizeof(v)) ? v : fallback;
}

char* g_debuginfo_path = nullptr;
const Dwfl_Callbacks kCallbacks = {dwfl_linux_proc_find_elf,
                                   dwfl_standard_find_debuginfo, nullptr,
                                   &g_debuginfo_path};
Dwfl* g_dwfl = nullptr;

// Reads the process's modules from /proc/PID/maps again (objects it
// dlopen'ed since are then known); exits on an access error.
void ReportModules() {
  if (g_dwfl == nullptr && (g_dwfl = dwfl_begin(&kCallbacks)) == nullptr) {
    Fail(std::string("libdwfl: ") + dwfl_errmsg(-1));
  }
  dwfl_report_begin(g_dwfl);
  const int err = dwfl_linux_proc_report(g_dwfl, g_pid);
  dwfl_report_end(g_dwfl, nullptr, nullptr);
  if (err > 0) FailAccess(err);
  if (err < 0) Fail(Pid() + ": cannot read its maps");
}

struct Found {
  const char* symbol;
  const char* module_part;  // a module whose name has this, or nullptr
  uint64_t address = 0;
};

int FindSymbol(Dwfl_Module* m, void**, const char* name, Dwarf_Addr, void* arg) {
  auto* f = static_cast<Found*>(arg);
  if (f->module_part != nullptr && strstr(name, f->module_part) == nullptr) {
    return DWARF_CB_OK;
  }
  const int n = dwfl_module_getsymtab(m);
  for (int i = 1; i < n; ++i) {
    GElf_Sym sym;
    GElf_Addr addr;
    const char* s =
        dwfl_module_getsym_info(m, i, &sym, &addr, nullptr, nullptr, nullptr);
    if (s != nullptr && sym.st_shndx != SHN_UNDEF && strcmp(s, f->symbol) == 0) {
      f->address = addr;
      return DWARF_CB_ABORT;
    }
  }
  return DWARF_CB_OK;
}

uint64_t Symbol(const char* symbol, const char* module_part) {
  Found f{symbol, module_part};
  dwfl_getmodules(g_dwfl, FindSymbol, &f, 0);
  return f.address;
}

// A lock's name: its data symbol, as gdb's `info symbol` gives it, else its
// address.
std::string LockName(uint64_t addr) {
  char hex[32];
  snprintf(hex, sizeof(hex), "%#lx", static_cast<unsigned long>(addr));
  Dwfl_Module* m = dwfl_addrmodule(g_dwfl, addr);
  if (m == nullptr) return hex;
  uint64_t off = 0;
  const char* name = parklot::internal::diag::DataSymbolAt(m, addr, &off);
  if (name == nullptr) return hex;
  std::string out = name;
  if (off != 0) {
    char plus[32];
    snprintf(plus, sizeof(plus), "+%#lx", static_cast<unsigned long>(off));
    out += plus;
  }
  return out;
}

std::string TaskComm(int tid) {
  std::string path = "/proc/" + std::to_string(g_pid) + "/task/" +
                     std::to_string(tid) + "/comm";
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return "";
  char buf[64] = "";
  if (fgets(buf, sizeof(buf), f) == nullptr) buf[0] = '\0';
  fclose(f);
  buf[strcspn(buf, "\n")] = '\0';
  return buf;
}

struct Thread {
  int tid = 0;
  uint32_t slot = 0;
  bool queued = false;
  uint64_t key = 0;
  int64_t since_ns = 0;
};

// One screen. Returns false if the process is gone.
bool Screen(const DebugInfo& d, uint32_t tid_offset) {
  ReportModules();
  uint32_t highest;
  if (!Read(d.registry_highest, &highest, sizeof(highest))) {
    if (errno == ESRCH) return false;
    FailAccess(errno);
  }
  std::vector<Thread> threads;
  const uint32_t per = d.registry_chunk_slots;
  for (uint32_t c = 0; per != 0 && c <= highest / per && c < d.registry_chunk_count;
       ++c) {
    const uint64_t chunk = ReadOr<uint64_t>(d.registry_chunks + 8 * c, 0);
    if (chunk == 0) continue;
    const uint32_t n = std::min(per, highest + 1 - c * per);
    std::vector<uint64_t> by_index(n);
    if (!Read(chunk + d.registry_by_index_offset, by_index.data(), 8 * n)) {
      if (errno == ESRCH) return false;
      continue;
    }
    for (uint64_t td : by_index) {
      if (td == 0) continue;
      // A snapshot while threads come and go: a thread that exited since
      // reads as unreadable or as nothing; skipped.
      Thread t;
      t.tid = ReadOr<int32_t>(td - d.data_tls_offset + tid_offset, 0);
      t.slot = ReadOr<uint32_t>(td + d.slot_offset, 0);
      t.since_ns = ReadOr<int64_t>(td + d.parked_since_offset, 0);
      uint64_t rec = ReadOr<uint64_t>(td + d.record_pointer_offset, 0);
      if (rec == 0) rec = td + d.own_record_offset;
      t.queued = (ReadOr<uint32_t>(rec + d.parker_offset, 0) & d.parker_queued) != 0;
      t.key = ReadOr<uint64_t>(rec + d.key_offset, 0);
      if (t.tid > 0) threads.push_back(t);
    }
  }
  if (kill(g_pid, 0) != 0 && errno == ESRCH) return false;

  std::map<uint32_t, const Thread*> by_slot;
  std::map<int, const Thread*> by_tid;
  for (const Thread& t : threads) {
    by_slot[t.slot] = &t;
    by_tid[t.tid] = &t;
  }
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  const int64_t now_ns = now.tv_sec * 1000000000LL + now.tv_nsec;
  int parked = 0;
  for (const Thread& t : threads) parked += t.queued;
  char clock[16];
  strftime(clock, sizeof(clock), "%H:%M:%S", localtime(&now.tv_sec));
  printf("parklot top: %s, %zu threads, %d parked, %s\n", Pid().c_str(),
         threads.size(), parked, clock);
  if (parked == 0) return true;
  printf("  %-8s %-16s %-32s %10s  %s\n", "TID", "COMMAND", "WAITS ON", "FOR",
         "HELD BY");
  std::map<int, std::pair<int, std::string>> waits_for;  // tid -> holder, lock
  for (const Thread& t : threads) {
    if (!t.queued) continue;
    const std::string name = LockName(t.key);
    // The holder, where two records agree (as `info parklot`): the shim's
    // lock word names a slot, glibc's field (a mutex's __owner at offset
    // 8, a write-locked rwlock's __cur_writer at 24) a tid, and both must
    // be one thread's.
    std::string held = "-";
    const uint32_t word = ReadOr<uint32_t>(t.key, 0);
    const Thread* holder = nullptr;
    // A mutex's word holds glibc's values (1 or 2: locked), its holder's
    // slot at mutex_slot_offset.
    if (word >= 1 && word <= d.mutex_locked_max) {
      auto it = by_tid.find(ReadOr<int32_t>(t.key + 8, 0));
      const uint32_t slot = ReadOr<uint32_t>(t.key + d.mutex_slot_offset, 0);
      if (it != by_tid.end() && slot != 0 && it->second->slot == slot) {
        holder = it->second;
      }
    }
    if (holder == nullptr && (word & d.rwlock_writer_bit)) {
      auto it = by_tid.find(ReadOr<int32_t>(t.key + 24, 0));
      const uint64_t mask = (uint64_t{1} << d.rwlock_slot_bits) - 1;
      const uint32_t slot = static_cast<uint32_t>(
          (ReadOr<uint64_t>(t.key, 0) >> d.rwlock_slot_shift) & mask);
      if (it != by_tid.end() && slot != 0 && it->second->slot == slot) {
        holder = it->second;
      }
    }
    if (holder != nullptr) {
      held = std::to_string(holder->tid);
      waits_for[t.tid] = {holder->tid, name};
    }
    char since[32] = "?";
    if (t.since_ns > 0) {
      snprintf(since, sizeof(since), "%.3f s",
               static_cast<double>(std::max<int64_t>(0, now_ns - t.since_ns)) / 1e9);
    }
    printf("  %-8d %-16s %-32s %10s  %s\n", t.tid, TaskComm(t.tid).c_str(),
           name.c_str(), since, held.c_str());
  }
  // Each thread waits for one holder at most: follow the chains.
  std::set<std::set<int>> reported;
  for (const auto& [start, unused] : waits_for) {
    std::vector<std::pair<int, std::string>> path;
    std::map<int, size_t> seen;
    int tid = start;
    while (waits_for.count(tid) != 0 && seen.count(tid) == 0) {
      seen[tid] = path.size();
      path.push_back({tid, waits_for[tid].second});
      tid = waits_for[tid].first;
    }
    if (seen.count(tid) == 0) continue;
    std::set<int> members;
    std::string text = "deadlock:";
    for (size_t i = seen[tid]; i < path.size(); ++i) {
      members.insert(path[i].first);
      text += " thread " + std::to_string(path[i].first) + " -> " +
              path[i].second + " ->";
    }
    if (!reported.insert(members).second) continue;
    printf("%s thread %d\n", text.c_str(), path[seen[tid]].first);
  }
  return true;
}

[[noreturn]] void Usage() {
  fprintf(stderr, "usage: parklot top [--once] PID\n");
  exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  bool once = false;
  const char* pid_arg = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--once") == 0) {
      once = true;
    } else if (argv[i][0] == '-' || pid_arg != nullptr) {
      Usage();
    } else {
      pid_arg = argv[i];
    }
  }
  if (pid_arg == nullptr) Usage();
  char* end;
  const long pid = strtol(pid_arg, &end, 10);
  if (*end != '\0' || pid <= 0 || pid > INT32_MAX) {
    fprintf(stderr, "parklot top: %s: not a process id\n", pid_arg);
    return 2;
  }
  g_pid = static_cast<pid_t>(pid);
  g_comm = TaskComm(g_pid);
  if (g_comm.empty() && kill(g_pid, 0) != 0 && errno == ESRCH) FailAccess(ESRCH);

  ReportModules();
  const uint64_t info_addr = Symbol("parklot_debug_info", nullptr);
  if (info_addr == 0) {
    Fail(Pid() + ": not running under the parklot shim (no "
                 "parklot_debug_info in its objects)");
  }
  DebugInfo d;
  if (!Read(info_addr, &d, sizeof(d))) FailAccess(errno);
  if (d.magic != kMagic) Fail(Pid() + ": parklot_debug_info has a bad magic number");
  if (d.version != kVersion) {
    Fail(Pid() + ": its shim's parklot_debug_info is version " +
         std::to_string(d.version) + "; top needs " + std::to_string(kVersion) +
         " (a newer shim)");
  }
  if (d.data_tls_offset == 0 || d.registry_chunks == 0) {
    Fail(Pid() + ": the shim's constructor has not run yet");
  }
  // glibc's description of its thread descriptor's tid field for
  // libthread_db: {size in bits, count, offset}.
  const uint64_t tid_desc = Symbol("_thread_db_pthread_tid", "libc.so");
  uint32_t desc[3];
  if (tid_desc == 0 || !Read(tid_desc, desc, sizeof(desc)) || desc[0] != 32) {
    Fail(Pid() + ": its libc describes no thread id (_thread_db_pthread_tid)");
  }
  for (;;) {
    if (!once) printf("\033[H\033[2J");
    if (!Screen(d, desc[2])) FailAccess(ESRCH);
    fflush(stdout);
    if (once) return 0;
    sleep(1);
  }
}
