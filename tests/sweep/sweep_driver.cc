// Signal, jump and kill sweep of the preload shim's paths (docs/testing.md,
// "The ptrace sweep").
//
//   sweep_driver --shim=LIB --victim=PROG [options]
//     --case=PATH:ACTION   run this case (repeatable; default: every case)
//     --skip=PATH:ACTION   leave this case out (repeatable)
//     --every=N            stop at every Nth instruction of the path (1: all)
//     --section-every=N    and at every Nth of those inside a lock section
//                          (every instruction of a mutex step region, the
//                          shim's section parklot_mutex_step, is a stop)
//     --run-timeout=S      a run that has not exited S seconds after the
//                          stop is a hang (default 4)
//     --preload=LIBS       LD_PRELOAD for the victim (default LIB; ASan's
//                          runtime goes first for an ASan-built shim)
//
// For each case it runs sweep_victim PATH none under ptrace once, single-
// stepping the path's task from the begin marker to the end marker and
// recording each instruction in the shim's text, as (address, how many
// times that address ran before). Then, for each chosen instruction, it
// runs sweep_victim PATH ACTION, steps to that instruction and sends
// SIGUSR1 (or SIGKILL for `kill`), lets the program run and classifies the
// run: pass, fail (the program's checks, or a lock-section depth or futex
// re-entry count left raised at the end marker), hang (no exit in time) or
// not reached (this run's path did not execute that instruction: contention
// differs a little between runs). Each failure is named by case, index,
// symbol+offset and source line (addr2line). Exit status 1 if anything
// failed or hung.
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

constexpr long kBeginMagic = 0x5eeb0001;  // sweep_victim.c's markers
constexpr long kEndMagic = 0x5eeb0002;

struct Step {
  uint64_t offset;  // in the shim file's address space (as nm shows)
  uint32_t occurrence;
  bool in_section;
  bool in_step;  // from a mutex step's first store to its end
};

enum Kind { kPass, kFail, kHang, kNotReached };
const char* const kKindNames[] = {"pass", "FAIL", "HANG", "not reached"};

struct Outcome {
  Kind kind = kPass;
  std::string detail;
  std::vector<Step> trace;  // the record run's
};

struct Options {
  std::string shim, victim, preload;
  std::vector<std::string> cases, skips;
  int every = 1, section_every = 1;
  int run_timeout_s = 4;
};
Options g_opt;

// Offsets of the shim's thread-locals in its TLS block (nm), 0 if absent.
uint64_t g_off_section, g_off_depth;
bool g_have_section, g_have_depth;

struct Symbol {
  uint64_t addr;
  std::string name;
};
std::vector<Symbol> g_symbols;  // the shim's text symbols, sorted

// The mutex step regions (sync/mutex_core.h, PARKLOT_MUTEX_STEP), as
// [begin, end) offsets, begin being the first instruction after the step's
// first store; the sweep stops at every one, and at the store before.
std::vector<std::pair<uint64_t, uint64_t>> g_step_regions;

volatile sig_atomic_t g_timed_out;
void OnAlarm(int) { g_timed_out = 1; }

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

std::string Run(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

void LoadSymbols() {
  const std::string out = Run("nm --defined-only '" + g_opt.shim + "'");
  size_t pos = 0;
  while (pos < out.size()) {
    size_t end = out.find('\n', pos);
    if (end == std::string::npos) end = out.size();
    const std::string line = out.substr(pos, end - pos);
    pos = end + 1;
    char type = 0;
    unsigned long long addr = 0;
    char name[1024];
    if (sscanf(line.c_str(), "%llx %c %1023s", &addr, &type, name) != 3) continue;
    const std::string n = name;
    if (n == "_ZN7parklot8internal9t_sectionE") {
      g_off_section = addr;
      g_have_section = true;
    } else if (n.find("5futex") != std::string::npos && n.size() > 9 &&
               n.compare(n.size() - 9, 9, "7t_depthE") == 0) {
      g_off_depth = addr;
      g_have_depth = true;
    }
    if (type == 't' || type == 'T' || type == 'W' || type == 'w') {
      g_symbols.push_back({addr, n});
    }
  }
  std::sort(g_symbols.begin(), g_symbols.end(),
            [](const Symbol& a, const Symbol& b) { return a.addr < b.addr; });
}

// Reads the shim's section parklot_mutex_step (five 32-bit fields an
// entry: begin, branch, end, restart, each an offset from its own field's
// address, and the kind). The region sampled starts at the instruction
// before `begin`, which makes the step's first store: a stop there is
// before it. That instruction is found in the record run's trace.
void LoadStepRegions() {
  FILE* f = fopen(g_opt.shim.c_str(), "rb");
  if (f == nullptr) return;
  Elf64_Ehdr eh;
  std::vector<Elf64_Shdr> sh;
  if (fread(&eh, sizeof eh, 1, f) == 1 && eh.e_shentsize == sizeof(Elf64_Shdr)) {
    sh.resize(eh.e_shnum);
    fseek(f, (long)eh.e_shoff, SEEK_SET);
    if (fread(sh.data(), sizeof(Elf64_Shdr), sh.size(), f) != sh.size()) sh.clear();
  }
  auto read = [f](const Elf64_Shdr& s) {
    std::string d(s.sh_size, '\0');
    fseek(f, (long)s.sh_offset, SEEK_SET);
    if (fread(&d[0], 1, d.size(), f) != d.size()) d.clear();
    return d;
  };
  if (eh.e_shstrndx < sh.size()) {
    const std::string names = read(sh[eh.e_shstrndx]);
    for (const Elf64_Shdr& s : sh) {
      if (s.sh_name >= names.size() ||
          strcmp(names.c_str() + s.sh_name, "parklot_mutex_step") != 0) {
        continue;
      }
      const std::string d = read(s);
      for (size_t i = 0; i + 20 <= d.size(); i += 20) {
        int32_t e[5];
        memcpy(e, d.data() + i, sizeof e);
        const uint64_t field = s.sh_addr + i;
        g_step_regions.push_back({field + e[0], field + 8 + e[2]});
      }
    }
  }
  fclose(f);
}

// "Symbol+0xN" (mangled; addr2line demangles in the report).
std::string SymbolAt(uint64_t off) {
  auto it = std::upper_bound(g_symbols.begin(), g_symbols.end(), off,
                             [](uint64_t a, const Symbol& s) { return a < s.addr; });
  if (it == g_symbols.begin()) return "?";
  --it;
  char buf[64];
  snprintf(buf, sizeof buf, "+0x%llx", (unsigned long long)(off - it->addr));
  return it->name + buf;
}

// Function and source line of each offset, one addr2line for all.
std::vector<std::string> Describe(const std::vector<uint64_t>& offs) {
  std::vector<std::string> lines;
  if (offs.empty()) return lines;
  std::string cmd = "addr2line -f -C -p -e '" + g_opt.shim + "'";
  for (uint64_t o : offs) {
    char buf[32];
    snprintf(buf, sizeof buf, " 0x%llx", (unsigned long long)o);
    cmd += buf;
  }
  const std::string out = Run(cmd + " 2>/dev/null");
  size_t pos = 0;
  while (pos < out.size() && lines.size() < offs.size()) {
    size_t end = out.find('\n', pos);
    if (end == std::string::npos) end = out.size();
    std::string l = out.substr(pos, end - pos);
    // Keep the file's base name, and no line where the debug information
    // has none (it names crtstuff.c:? then).
    const size_t at = l.rfind(" at ");
    if (at != std::string::npos) {
      const size_t slash = l.rfind('/');
      if (l.find('?', at) != std::string::npos) {
        l.resize(at);
      } else if (slash != std::string::npos && slash > at) {
        l = l.substr(0, at + 4) + l.substr(slash + 1);
      }
    }
    lines.push_back(l);
    pos = end + 1;
  }
  while (lines.size() < offs.size()) lines.push_back("?");
  return lines;
}

// The shim's executable mappings in `pid` and its load base.
struct ShimText {
  uint64_t base = 0;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  bool Contains(uint64_t a) const {
    for (auto& r : ranges) {
      if (a >= r.first && a < r.second) return true;
    }
    return false;
  }
};

ShimText ReadShimText(pid_t pid) {
  ShimText t;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
  FILE* f = fopen(path, "r");
  if (f == nullptr) return t;
  std::string base_name = g_opt.shim.substr(g_opt.shim.rfind('/') + 1);
  char line[4096];
  bool have_base = false;
  while (fgets(line, sizeof line, f) != nullptr) {
    unsigned long long lo, hi, off;
    char perms[8];
    if (sscanf(line, "%llx-%llx %7s %llx", &lo, &hi, perms, &off) != 4) continue;
    const char* name = strrchr(line, '/');
    if (name == nullptr) continue;
    std::string n = name + 1;
    while (!n.empty() && (n.back() == '\n' || n.back() == ' ')) n.pop_back();
    if (n != base_name) continue;
    if (!have_base && off == 0) {
      t.base = lo;
      have_base = true;
    }
    if (perms[2] == 'x') t.ranges.push_back({lo, hi});
  }
  fclose(f);
  return t;
}

long Peek(pid_t tid, uint64_t addr) {
  errno = 0;
  return ptrace(PTRACE_PEEKDATA, tid, (void*)addr, nullptr);
}

// One run of the victim. `target` null: record the path's trace.
Outcome RunOnce(const std::string& path, const std::string& action,
                const Step* target) {
  Outcome o;
  FILE* log = tmpfile();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fileno(log), 1);
    dup2(fileno(log), 2);
    ptrace(PTRACE_TRACEME, 0, nullptr, nullptr);
    setenv("LD_PRELOAD", g_opt.preload.c_str(), 1);
    // One bucket: whatever a handler or a later thread touches shares the
    // bucket the path locks. No spinning: the same path every run.
    setenv("PARKLOT_POLICY", "fixed:1", 1);
    setenv("PARKLOT_SPIN", "off", 1);
    setenv("PARKLOT_SYSCALL_FUTEX", "1", 1);
    char wd[16];
    snprintf(wd, sizeof wd, "%d", g_opt.run_timeout_s);
    setenv("SWEEP_WATCHDOG_S", wd, 1);
    // The record run sets up what the case's runs set up (the handler's
    // threads start before the path and may do the lot's first-use work),
    // so that both step the same instructions; it sends no signal.
    if (target == nullptr) setenv("SWEEP_RECORD", "1", 1);
    execl(g_opt.victim.c_str(), g_opt.victim.c_str(), path.c_str(), action.c_str(),
          (char*)nullptr);
    _exit(127);
  }
  int st;
  waitpid(pid, &st, 0);  // the exec's SIGTRAP
  ptrace(PTRACE_SETOPTIONS, pid, nullptr,
         (void*)(long)(PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK |
                       PTRACE_O_EXITKILL));
  ptrace(PTRACE_CONT, pid, nullptr, nullptr);

  std::set<pid_t> tasks = {pid};
  pid_t stepped = 0;
  bool stepping = false, shared_tls = false, reached = false, ended = false;
  uint64_t end_addr = 0, tls = 0;
  ShimText text;
  std::map<uint64_t, uint32_t> seen;
  int main_status = -1;
  // The record run steps the whole path: allow it a generous limit. A
  // stopped run gets run_timeout_s from the stop.
  const double record_limit = 120;
  double deadline = Now() + record_limit;

  struct sigaction sa = {};
  sa.sa_handler = OnAlarm;  // no SA_RESTART: waitpid returns EINTR
  sigaction(SIGALRM, &sa, nullptr);
  g_timed_out = 0;

  while (!tasks.empty()) {
    double left = deadline - Now();
    if (left <= 0) g_timed_out = 1;
    if (!g_timed_out) {
      itimerval it = {};
      it.it_value.tv_sec = (time_t)left;
      it.it_value.tv_usec = (suseconds_t)((left - (time_t)left) * 1e6) + 1;
      setitimer(ITIMER_REAL, &it, nullptr);
    }
    const pid_t tid = g_timed_out ? -1 : waitpid(-1, &st, __WALL);
    itimerval zero = {};
    setitimer(ITIMER_REAL, &zero, nullptr);
    if (tid < 0) {
      if (errno == ECHILD) break;
      if (!g_timed_out) continue;
      // A hang: end every task of the victim and collect them.
      o.kind = kHang;
      char buf[96];
      snprintf(buf, sizeof buf, "no exit %ds after the %s", g_opt.run_timeout_s,
               target != nullptr ? "stop" : "record run began");
      o.detail = buf;
      for (pid_t t : tasks) kill(t, SIGKILL);
      while (waitpid(-1, &st, __WALL) > 0) {
      }
      tasks.clear();
      break;
    }
    if (WIFEXITED(st) || WIFSIGNALED(st)) {
      tasks.erase(tid);
      if (tid == pid) main_status = st;
      continue;
    }
    if (!WIFSTOPPED(st)) continue;
    tasks.insert(tid);
    const int sig = WSTOPSIG(st);
    const bool step_me = stepping && tid == stepped;
    const auto resume = [&](int s) {
      ptrace(step_me ? PTRACE_SINGLESTEP : PTRACE_CONT, tid, nullptr, (void*)(long)s);
    };
    if ((st >> 16) != 0 || sig == SIGSTOP) {  // a clone event, a new task
      resume(0);
      continue;
    }
    if (sig != SIGTRAP) {  // the program's own signal: deliver it
      resume(sig);
      continue;
    }
    user_regs_struct regs;
    ptrace(PTRACE_GETREGS, tid, nullptr, &regs);
    if (step_me) {
      if (regs.rip == end_addr) {
        stepping = false;
        ptrace(PTRACE_CONT, tid, nullptr, nullptr);
        continue;
      }
      if (text.Contains(regs.rip)) {
        const uint64_t off = regs.rip - text.base;
        const uint32_t occ = ++seen[regs.rip];
        bool in_section = false;
        if (tls != 0 && !shared_tls && g_have_section) {
          in_section = (Peek(tid, tls + g_off_section) & 0xffffffff) != 0;
        }
        if (target == nullptr) {
          o.trace.push_back({off, occ, in_section, false});
        } else if (off == target->offset && occ == target->occurrence) {
          stepping = false;
          reached = true;
          deadline = Now() + g_opt.run_timeout_s;
          if (action == "kill") {
            kill(tid, SIGKILL);  // its own thread group: only it dies
          } else {
            syscall(SYS_tgkill, shared_tls ? tid : pid, tid, SIGUSR1);
            ptrace(PTRACE_CONT, tid, nullptr, nullptr);
          }
          continue;
        }
      }
      ptrace(PTRACE_SINGLESTEP, tid, nullptr, nullptr);
      continue;
    }
    if (regs.rax == kBeginMagic && stepped == 0) {
      stepped = tid;
      stepping = true;
      tls = regs.rbx;
      end_addr = regs.rcx;
      shared_tls = regs.rdx != 0;
      text = ReadShimText(tid);
      ptrace(PTRACE_SINGLESTEP, tid, nullptr, nullptr);
      continue;
    }
    if (regs.rax == kEndMagic && tid == stepped) {
      ended = true;
      if (target != nullptr && !reached) {
        // This run's path missed the instruction: nothing to wait for.
        for (pid_t t : tasks) kill(t, SIGKILL);
        while (waitpid(-1, &st, __WALL) > 0) {
        }
        tasks.clear();
        break;
      }
      // Nothing of the lot's may stay raised past the path, a jump
      // included: a section depth defers every later wake of this thread,
      // a futex re-entry count sends its later calls to the kernel.
      if (tls != 0 && !shared_tls) {
        const long sec = g_have_section ? Peek(tid, tls + g_off_section) & 0xffffffff : 0;
        const long depth = g_have_depth ? (int)Peek(tid, tls + g_off_depth) : 0;
        if (sec != 0 || depth != 0) {
          char buf[128];
          snprintf(buf, sizeof buf,
                   "after the path: lock-section depth %ld, futex t_depth %ld", sec,
                   depth);
          o.kind = kFail;
          o.detail = buf;
        }
      }
    }
    resume(0);  // a marker's int3, or a stray step trap
  }

  if (o.kind != kHang) {
    if (target != nullptr && !reached) {
      o.kind = kNotReached;
    } else if (main_status == -1 || !WIFEXITED(main_status) ||
               WEXITSTATUS(main_status) != 0) {
      o.kind = (WIFEXITED(main_status) && WEXITSTATUS(main_status) == 3) ? kHang : kFail;
      char buf[64];
      if (WIFEXITED(main_status)) {
        snprintf(buf, sizeof buf, "exit status %d", WEXITSTATUS(main_status));
      } else {
        snprintf(buf, sizeof buf, "killed by signal %d", WTERMSIG(main_status));
      }
      o.detail = o.detail.empty() ? buf : o.detail + "; " + buf;
    } else if (stepped == 0 || (!ended && action != "kill")) {
      o.kind = kFail;
      o.detail = "the markers were not reached";
    }
  }
  if (o.kind == kFail || o.kind == kHang) {
    // The program's own words: its FAIL lines.
    fflush(log);
    rewind(log);
    char line[512];
    while (fgets(line, sizeof line, log) != nullptr) {
      if (strncmp(line, "FAIL", 4) == 0) {
        line[strcspn(line, "\n")] = '\0';
        o.detail += std::string("; ") + line;
      }
    }
  }
  fclose(log);
  return o;
}

struct Case {
  std::string path, action;
  std::string Name() const { return path + ":" + action; }
};

std::vector<Case> AllCases() {
  std::vector<Case> cs;
  for (const char* p : {"mutex", "cond", "sem", "rwlock", "futex"}) {
    for (const char* a : {"lock", "notify", "post", "wake", "jump"}) cs.push_back({p, a});
  }
  cs.push_back({"clone", "kill"});
  cs.push_back({"single", "lock"});
  cs.push_back({"single", "jump"});
  return cs;
}

// Returns the number of failed or hung runs.
int Sweep(const Case& c) {
  const double t0 = Now();
  Outcome rec = RunOnce(c.path, c.action, nullptr);
  if (rec.kind != kPass || rec.trace.empty()) {
    printf("%s: the record run failed (%s%s)\n", c.Name().c_str(),
           kKindNames[rec.kind], rec.trace.empty() ? ", no shim instruction" : "");
    printf("  %s\n", rec.detail.c_str());
    return 1;
  }
  size_t in_steps = 0;
  for (size_t k = 0; k < rec.trace.size(); ++k) {
    for (const auto& r : g_step_regions) {
      const uint64_t off = rec.trace[k].offset;
      if (off >= r.first && off < r.second) {
        // The step's first store: the instruction before its region.
        if (k > 0 && off == r.first) rec.trace[k - 1].in_step = true;
        rec.trace[k].in_step = true;
      }
    }
  }
  std::vector<size_t> chosen;
  size_t in_sections = 0, section_index = 0;
  for (size_t k = 0; k < rec.trace.size(); ++k) {
    bool take = k % g_opt.every == 0 || rec.trace[k].in_step;
    in_steps += rec.trace[k].in_step;
    if (rec.trace[k].in_section) {
      ++in_sections;
      if (section_index++ % g_opt.section_every == 0) take = true;
    }
    if (take) chosen.push_back(k);
  }
  printf("%s: %zu shim instructions on the path (%zu in lock sections, %zu in "
         "mutex steps), %zu stops\n",
         c.Name().c_str(), rec.trace.size(), in_sections, in_steps, chosen.size());
  fflush(stdout);
  int counts[4] = {};
  std::vector<std::pair<size_t, Outcome>> bad;
  for (size_t k : chosen) {
    Outcome o = RunOnce(c.path, c.action, &rec.trace[k]);
    ++counts[o.kind];
    if (o.kind == kFail || o.kind == kHang) bad.push_back({k, std::move(o)});
  }
  std::vector<uint64_t> offs;
  for (auto& b : bad) offs.push_back(rec.trace[b.first].offset);
  const std::vector<std::string> where = Describe(offs);
  std::map<std::string, int> by_function;
  for (size_t i = 0; i < bad.size(); ++i) {
    const Step& s = rec.trace[bad[i].first];
    printf("  %s %s #%zu 0x%llx %s (%s)%s: %s\n", kKindNames[bad[i].second.kind],
           c.Name().c_str(), bad[i].first, (unsigned long long)s.offset,
           SymbolAt(s.offset).c_str(), where[i].c_str(),
           s.in_section ? " [in lock section]" : s.in_step ? " [in mutex step]" : "", bad[i].second.detail.c_str());
    std::string fn = where[i].substr(0, where[i].find(" at "));
    ++by_function[fn];
  }
  printf("%s: %d pass, %d fail, %d hang, %d not reached (%.1f s)\n", c.Name().c_str(),
         counts[kPass], counts[kFail], counts[kHang], counts[kNotReached], Now() - t0);
  for (auto& f : by_function) {
    printf("  %s fails in %s (%d stops)\n", c.Name().c_str(), f.first.c_str(), f.second);
  }
  fflush(stdout);
  return counts[kFail] + counts[kHang];
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&](const char* flag) -> const char* {
      const size_t n = strlen(flag);
      return a.compare(0, n, flag) == 0 ? argv[i] + n : nullptr;
    };
    if (const char* v = value("--shim=")) {
      g_opt.shim = v;
    } else if (const char* v = value("--preload=")) {
      g_opt.preload = v;
    } else if (const char* v = value("--victim=")) {
      g_opt.victim = v;
    } else if (const char* v = value("--case=")) {
      g_opt.cases.push_back(v);
    } else if (const char* v = value("--skip=")) {
      g_opt.skips.push_back(v);
    } else if (const char* v = value("--every=")) {
      g_opt.every = std::max(1, atoi(v));
    } else if (const char* v = value("--section-every=")) {
      g_opt.section_every = std::max(1, atoi(v));
    } else if (const char* v = value("--run-timeout=")) {
      g_opt.run_timeout_s = std::max(1, atoi(v));
    } else {
      fprintf(stderr, "sweep_driver: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (g_opt.shim.empty() || g_opt.victim.empty()) {
    fprintf(stderr, "usage: sweep_driver --shim=LIB --victim=PROG [options]\n");
    return 2;
  }
  if (g_opt.preload.empty()) g_opt.preload = g_opt.shim;
  LoadSymbols();
  LoadStepRegions();
  // An x86-64 shim inlines its mutex steps as regions: none found means the
  // sweep would stop in them only by chance.
  if (g_step_regions.empty()) {
    fprintf(stderr, "sweep_driver: no mutex step regions (section "
                    "parklot_mutex_step) in %s\n", g_opt.shim.c_str());
    return 2;
  }
  // The section depth is what every later call of the thread reads: the
  // sweep cannot check what it was built for without it. (A futex re-entry
  // count, t_depth, is checked too where a shim still has one.)
  if (!g_have_section) {
    printf("FAIL: the shim's t_section symbol is missing: no depth checks\n");
    return 1;
  }
  std::vector<Case> cases;
  for (const Case& c : AllCases()) {
    const std::string n = c.Name();
    if (!g_opt.cases.empty() &&
        std::find(g_opt.cases.begin(), g_opt.cases.end(), n) == g_opt.cases.end()) {
      continue;
    }
    if (std::find(g_opt.skips.begin(), g_opt.skips.end(), n) != g_opt.skips.end()) {
      printf("%s: skipped (--skip)\n", n.c_str());
      continue;
    }
    cases.push_back(c);
  }
  const double t0 = Now();
  int failed = 0;
  std::vector<std::string> failing;
  for (const Case& c : cases) {
    const int f = Sweep(c);
    failed += f;
    if (f != 0) failing.push_back(c.Name());
  }
  printf("sweep: %zu cases, %d failed or hung stops, %.1f s\n", cases.size(), failed,
         Now() - t0);
  if (!failing.empty()) {
    printf("sweep: failing cases:");
    for (auto& n : failing) printf(" %s", n.c_str());
    printf("\n");
  }
  return failed == 0 ? 0 : 1;
}
