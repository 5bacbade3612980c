// `parklot run`: runs a program under the LD_PRELOAD shim. The launcher
// (tools/parklot) hands `run` to this program, so that starting a program
// costs one small exec and no probe subprocesses (bench/launcher_cost.sh).
//
//   parklot-run [--stats] [--futex] [--deadlock[=report|abort]]
//               [--profile[=FILE]] [--profile-rate=N] [--] CMD [ARGS...]
//
// Options end at `--` or at the first word that is not an option.
//
// Plain `run` sets LD_PRELOAD and execs CMD (the launcher is gone). With
// --stats, --deadlock or --profile the launcher stays CMD's parent, as
// `perf stat` and valgrind do: every process of CMD writes its reports into
// a private directory (mkdtemp, mode 0700; PARKLOT_STATS, PARKLOT_REPORT and
// PARKLOT_PROFILE with %p), which the launcher copies to its own stderr as
// they appear and after CMD exits, so a program that closes its stderr
// (sort, xz) still gets its report. Profiles are moved to FILE (%p = the
// pid) and named; where a report that was asked for has nothing to say,
// one line says so. The launcher outlives CMD: SIGINT, SIGTERM, SIGHUP,
// SIGQUIT and every other catchable signal that would end it are passed to
// CMD (a terminal's, sent to the whole process group, reaches CMD itself),
// SIGPIPE is ignored (a reader that left just stops the copying), and it
// exits with CMD's status, 128+N when a signal N ended it, after removing
// the directory.
//
// C-style on purpose: it needs libc alone (no libstdc++ to load).
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <elf.h>

extern char** environ;

namespace {

[[noreturn]] void Usage(const char* what, const char* arg) {
  fprintf(stderr, "parklot: run: %s%s%s%s\n", what, arg ? " '" : "",
          arg ? arg : "", arg ? "'" : "");
  fputs(
      "usage: parklot run [--stats] [--futex] [--deadlock[=abort]] "
      "[--profile[=FILE]]\n"
      "                   [--profile-rate=N] [--] CMD [ARGS...]\n"
      "(parklot --help for the details)\n",
      stderr);
  exit(2);
}

// CMD as execvp would find it, in `out`. Returns 0, or why not: ENOENT
// (nothing by that name), EACCES (found but not executable), EISDIR (a
// directory named with a '/'), or what stat said of a path with a '/'.
// A path search skips directories, as bash does, and goes past a file that
// is not executable, as execvp does, but reports it if nothing else is found.
int Resolve(const char* cmd, char* out, size_t size) {
  struct stat st;
  if (strchr(cmd, '/') != nullptr) {
    snprintf(out, size, "%s", cmd);
    if (stat(cmd, &st) != 0) return errno;
    if (S_ISDIR(st.st_mode)) return EISDIR;
    return access(cmd, X_OK) == 0 ? 0 : errno;
  }
  const char* path = getenv("PATH");
  if (path == nullptr) path = "/usr/local/bin:/usr/bin:/bin";
  char denied[PATH_MAX] = "";
  for (const char* p = path;; ) {
    const char* end = strchr(p, ':');
    const size_t len = end ? static_cast<size_t>(end - p) : strlen(p);
    if (len == 0) {
      snprintf(out, size, "%s", cmd);
    } else {
      snprintf(out, size, "%.*s/%s", static_cast<int>(len), p, cmd);
    }
    if (stat(out, &st) == 0 && S_ISREG(st.st_mode)) {
      if (access(out, X_OK) == 0) return 0;
      if (denied[0] == '\0') snprintf(denied, sizeof(denied), "%s", out);
    }
    if (end == nullptr) break;
    p = end + 1;
  }
  if (denied[0] == '\0') return ENOENT;
  snprintf(out, size, "%s", denied);
  return EACCES;
}

bool ReadAt(int fd, void* buf, size_t size, off_t off) {
  return pread(fd, buf, size, off) == static_cast<ssize_t>(size);
}

// Why the shim cannot serve the ELF program at `path` (nullptr when it can,
// or when it is not an ELF file: a script). `needs_sanitizer` is set when it
// names libtsan or libasan among its DT_NEEDED libraries.
const char* Unserved(const char* path, bool* needs_sanitizer) {
  static char why[96];
  *needs_sanitizer = false;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  unsigned char ident[EI_NIDENT];
  const char* result = nullptr;
  Elf64_Ehdr eh;
  if (!ReadAt(fd, ident, sizeof(ident), 0) || memcmp(ident, ELFMAG, SELFMAG) != 0) {
    close(fd);
    return nullptr;
  }
  if (ident[EI_CLASS] != ELFCLASS64) {
    close(fd);
    return "a 32-bit program";
  }
  if (!ReadAt(fd, &eh, sizeof(eh), 0)) {
    close(fd);
    return nullptr;
  }
  if (eh.e_machine != EM_X86_64) {
    snprintf(why, sizeof(why), "built for another machine (e_machine %u)",
             static_cast<unsigned>(eh.e_machine));
    close(fd);
    return why;
  }
  bool interp = false;
  Elf64_Phdr dynamic{};
  for (unsigned i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (!ReadAt(fd, &ph, sizeof(ph), eh.e_phoff + i * off_t{eh.e_phentsize})) break;
    if (ph.p_type == PT_INTERP) interp = true;
    if (ph.p_type == PT_DYNAMIC) dynamic = ph;
  }
  if (!interp) {
    close(fd);
    return "statically linked";
  }
  // DT_NEEDED names: the dynamic section's DT_STRTAB is an address; the
  // PT_LOAD segment holding it gives its file offset.
  if (dynamic.p_filesz > 0 && dynamic.p_filesz < (1 << 20)) {
    const size_t n = dynamic.p_filesz / sizeof(Elf64_Dyn);
    Elf64_Dyn* dyn = static_cast<Elf64_Dyn*>(malloc(dynamic.p_filesz));
    if (dyn != nullptr && ReadAt(fd, dyn, n * sizeof(Elf64_Dyn), dynamic.p_offset)) {
      Elf64_Addr strtab = 0;
      for (size_t i = 0; i < n && dyn[i].d_tag != DT_NULL; ++i) {
        if (dyn[i].d_tag == DT_STRTAB) strtab = dyn[i].d_un.d_ptr;
      }
      off_t strtab_off = -1;
      for (unsigned i = 0; strtab != 0 && i < eh.e_phnum; ++i) {
        Elf64_Phdr ph;
        if (!ReadAt(fd, &ph, sizeof(ph), eh.e_phoff + i * off_t{eh.e_phentsize})) break;
        if (ph.p_type == PT_LOAD && strtab >= ph.p_vaddr &&
            strtab < ph.p_vaddr + ph.p_filesz) {
          strtab_off = static_cast<off_t>(strtab - ph.p_vaddr + ph.p_offset);
        }
      }
      for (size_t i = 0; strtab_off >= 0 && i < n && dyn[i].d_tag != DT_NULL; ++i) {
        if (dyn[i].d_tag != DT_NEEDED) continue;
        char name[16] = {};
        if (pread(fd, name, sizeof(name) - 1, strtab_off + dyn[i].d_un.d_val) > 0 &&
            (strncmp(name, "libtsan.so", 10) == 0 || strncmp(name, "libasan.so", 10) == 0)) {
          *needs_sanitizer = true;
        }
      }
    }
    free(dyn);
  }
  close(fd);
  struct stat st;
  if (stat(path, &st) == 0 &&
      (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) ||
       ((st.st_mode & S_ISGID) && st.st_gid != getegid()))) {
    result = "setuid, setgid or with capabilities (glibc ignores LD_PRELOAD)";
  } else if (getxattr(path, "security.capability", nullptr, 0) > 0) {
    result = "setuid, setgid or with capabilities (glibc ignores LD_PRELOAD)";
  }
  return result;
}

// The sanitizer runtime the program loads (ld.so --list), in `out`: it must
// come ahead of the shim (TSan's interceptors then see the shim's locks;
// ASan insists on being first). Only for programs that name one.
bool SanitizerRuntime(const char* path, char* out, size_t size) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    dup2(fds[1], 1);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 2);
    unsetenv("LD_PRELOAD");
    execl("/lib64/ld-linux-x86-64.so.2", "ld.so", "--list", path, nullptr);
    _exit(127);
  }
  close(fds[1]);
  char buf[16384];
  size_t used = 0;
  for (ssize_t r; used < sizeof(buf) - 1 &&
                  ((r = read(fds[0], buf + used, sizeof(buf) - 1 - used)) > 0 ||
                   (r < 0 && errno == EINTR));) {
    if (r > 0) used += r;
  }
  buf[used] = '\0';
  close(fds[0]);
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  for (char* line = strtok(buf, "\n"); line != nullptr; line = strtok(nullptr, "\n")) {
    while (*line == ' ' || *line == '\t') ++line;
    if (strncmp(line, "libtsan.so", 10) != 0 && strncmp(line, "libasan.so", 10) != 0) continue;
    const char* arrow = strstr(line, " => /");
    if (arrow == nullptr) continue;
    const char* lib = arrow + 4;
    const char* end = strchr(lib, ' ');
    const size_t len = end ? static_cast<size_t>(end - lib) : strlen(lib);
    snprintf(out, size, "%.*s", static_cast<int>(len), lib);
    return true;
  }
  return false;
}

// The shim beside this program: in the Debian package both lie in
// /usr/lib/TRIPLET/parklot/; installed by tools/install,
// PREFIX/lib/parklot/parklot-run and PREFIX/lib/libparklot_preload.so; in
// Bazel's output tree, bazel-bin/tools/parklot_run and bazel-bin/preload/.
bool FindShim(char* out, size_t size) {
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return false;
  exe[n] = '\0';
  char* slash = strrchr(exe, '/');
  if (slash == nullptr) return false;
  *slash = '\0';
  static const char* const kCandidates[] = {"/libparklot_preload.so", "/../libparklot_preload.so",
                                            "/../preload/libparklot_preload.so"};
  for (const char* c : kCandidates) {
    snprintf(out, size, "%s%s", exe, c);
    if (access(out, R_OK) == 0) return true;
  }
  return false;
}

// --- collection of the reports -------------------------------------------

struct Seen {
  char name[NAME_MAX + 1];
  off_t printed;
};

char g_dir[PATH_MAX];
Seen* g_seen = nullptr;
size_t g_seen_count = 0, g_seen_cap = 0;

void WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// Copies what the stats.* and report.* files gained since the last call to
// stderr, in the order the files appeared (then by name).
void Drain() {
  DIR* d = opendir(g_dir);
  if (d == nullptr) return;
  struct Entry {
    char name[NAME_MAX + 1];
    struct timespec mtime;
  };
  Entry* entries = nullptr;
  size_t count = 0, cap = 0;
  while (const dirent* e = readdir(d)) {
    if (strncmp(e->d_name, "stats.", 6) != 0 && strncmp(e->d_name, "report.", 7) != 0) continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    if (count == cap) {
      cap = cap ? 2 * cap : 16;
      entries = static_cast<Entry*>(realloc(entries, cap * sizeof(Entry)));
      if (entries == nullptr) break;
    }
    snprintf(entries[count].name, sizeof(entries[count].name), "%s", e->d_name);
    entries[count].mtime = st.st_mtim;
    ++count;
  }
  qsort(entries, count, sizeof(Entry), [](const void* a, const void* b) {
    const Entry* x = static_cast<const Entry*>(a);
    const Entry* y = static_cast<const Entry*>(b);
    if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
  });
  for (size_t i = 0; i < count; ++i) {
    Seen* s = nullptr;
    for (size_t j = 0; j < g_seen_count; ++j) {
      if (strcmp(g_seen[j].name, entries[i].name) == 0) s = &g_seen[j];
    }
    if (s == nullptr) {
      if (g_seen_count == g_seen_cap) {
        g_seen_cap = g_seen_cap ? 2 * g_seen_cap : 16;
        g_seen = static_cast<Seen*>(realloc(g_seen, g_seen_cap * sizeof(Seen)));
        if (g_seen == nullptr) break;
      }
      s = &g_seen[g_seen_count++];
      snprintf(s->name, sizeof(s->name), "%s", entries[i].name);
      s->printed = 0;
    }
    const int fd = openat(dirfd(d), entries[i].name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[65536];
    for (ssize_t r; (r = pread(fd, buf, sizeof(buf), s->printed)) > 0;) {
      WriteAll(2, buf, static_cast<size_t>(r));
      s->printed += r;
    }
    close(fd);
  }
  free(entries);
  closedir(d);
}

// PATTERN with %p replaced by PID and %% by %.
void Expand(const char* pattern, const char* pid, char* out, size_t size) {
  size_t used = 0;
  for (const char* p = pattern; *p != '\0' && used + 1 < size; ++p) {
    if (p[0] == '%' && (p[1] == 'p' || p[1] == '%')) {
      const char* add = p[1] == 'p' ? pid : "%";
      used += static_cast<size_t>(snprintf(out + used, size - used, "%s", add));
      if (used >= size) used = size - 1;
      ++p;
    } else {
      out[used++] = *p;
    }
  }
  out[used] = '\0';
}

bool CopyFile(int dirfd, const char* from, const char* to) {
  const int in = openat(dirfd, from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) return false;
  const int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) {
    close(in);
    return false;
  }
  char buf[65536];
  bool ok = true;
  for (ssize_t r; (r = read(in, buf, sizeof(buf))) != 0;) {
    if (r < 0) {
      if (errno == EINTR) continue;
      ok = false;
      break;
    }
    for (ssize_t done = 0; done < r;) {
      const ssize_t w = write(out, buf + done, static_cast<size_t>(r - done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        ok = false;
        break;
      }
      done += w;
    }
    if (!ok) break;
  }
  close(in);
  return close(out) == 0 && ok;
}

// Moves each profile.PID (and .holders) to PATTERN with %p = PID and names it.
void MoveProfiles(const char* pattern) {
  DIR* d = opendir(g_dir);
  if (d == nullptr) return;
  while (const dirent* e = readdir(d)) {
    if (strncmp(e->d_name, "profile.", 8) != 0) continue;
    const char* pid = e->d_name + 8;
    if (strchr(pid, '.') != nullptr) continue;  // a .holders file
    char to[PATH_MAX], from_h[NAME_MAX + 16], to_h[PATH_MAX + 16];
    Expand(pattern, pid, to, sizeof(to));
    snprintf(from_h, sizeof(from_h), "%s.holders", e->d_name);
    snprintf(to_h, sizeof(to_h), "%s.holders", to);
    if (!CopyFile(dirfd(d), e->d_name, to)) {
      fprintf(stderr, "parklot: contention profile of pid %s not written to %s: %s\n", pid, to,
              strerror(errno));
      continue;
    }
    const bool holders = faccessat(dirfd(d), from_h, F_OK, 0) == 0 && CopyFile(dirfd(d), from_h, to_h);
    fprintf(stderr, "parklot: contention profile of pid %s: %s%s%s (parklot profile %s)\n", pid, to,
            holders ? " and " : "", holders ? to_h : "", to);
  }
  closedir(d);
}

// Whether a file whose name starts with `name` is in the directory, and,
// given `text`, has a line holding it.
bool Found(const char* name, const char* text) {
  DIR* d = opendir(g_dir);
  if (d == nullptr) return false;
  bool found = false;
  while (const dirent* e = readdir(d)) {
    if (found || strncmp(e->d_name, name, strlen(name)) != 0) continue;
    if (text == nullptr) {
      found = true;
      continue;
    }
    const int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    FILE* f = fd >= 0 ? fdopen(fd, "r") : nullptr;
    if (f == nullptr) {
      if (fd >= 0) close(fd);
      continue;
    }
    char* line = nullptr;
    size_t cap = 0;
    while (!found && getline(&line, &cap, f) > 0) found = strstr(line, text) != nullptr;
    free(line);
    fclose(f);
  }
  closedir(d);
  return found;
}

void RemoveDir() {
  DIR* d = opendir(g_dir);
  if (d != nullptr) {
    while (const dirent* e = readdir(d)) {
      if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
        unlinkat(dirfd(d), e->d_name, 0);
      }
    }
    closedir(d);
  }
  rmdir(g_dir);
}

}  // namespace

namespace {

// CMD's start, as posix_spawn would make it (a vfork: no copy of the
// launcher's memory): with the signal mask and the SIGPIPE the launcher was
// given, and one thing posix_spawn cannot give, PR_SET_PDEATHSIG: CMD is
// killed if the launcher is (SIGKILL, which it cannot pass on), so it is
// never left running as an orphan (the kernel clears it across a setuid
// exec). `exec_errno` is execv's errno where it failed (the child shares
// the launcher's memory until then).
struct SpawnArgs {
  const char* path;
  char** argv;
  const sigset_t* mask;
  bool pipe_default;
  pid_t launcher;
  int exec_errno;
};

int SpawnChild(void* p) {
  auto* a = static_cast<SpawnArgs*>(p);
  if (a->pipe_default) signal(SIGPIPE, SIG_DFL);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The launcher died before the line above: nobody would kill CMD.
  if (getppid() != a->launcher) _exit(137);
  sigprocmask(SIG_SETMASK, a->mask, nullptr);
  execv(a->path, a->argv);
  a->exec_errno = errno;
  _exit(127);
}

// Returns CMD's pid, or -1 with errno.
pid_t Spawn(SpawnArgs* a) {
  alignas(16) static char stack[64 * 1024];
  return clone(SpawnChild, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, a);
}

}  // namespace

int main(int argc, char** argv) {
  bool stats = false, futex = false;
  const char* deadlock = nullptr;
  const char* profile = nullptr;
  const char* profile_rate = nullptr;
  int i = 1;
  for (; i < argc; ++i) {
    const char* a = argv[i];
    if (strcmp(a, "--") == 0) {
      ++i;
      break;
    }
    if (a[0] != '-' || a[1] == '\0') break;  // the command: options end here
    if (strcmp(a, "--stats") == 0) {
      stats = true;
    } else if (strcmp(a, "--futex") == 0) {
      futex = true;
    } else if (strcmp(a, "--deadlock") == 0 || strcmp(a, "--deadlock=report") == 0) {
      deadlock = "report";
    } else if (strcmp(a, "--deadlock=abort") == 0) {
      deadlock = "abort";
    } else if (strcmp(a, "--profile") == 0) {
      profile = "./parklot-%p.prof";
    } else if (strncmp(a, "--profile=", 10) == 0 && a[10] != '\0') {
      profile = a + 10;
    } else if (strncmp(a, "--profile-rate=", 15) == 0) {
      const char* v = a + 15;
      char* end;
      errno = 0;
      const long n = strtol(v, &end, 10);
      if (*v < '0' || *v > '9' || *end != '\0' || errno != 0 || n < 1 || n > 1000000000) {
        Usage("--profile-rate wants nanoseconds of wait, a whole number from 1 to 1000000000, not", v);
      }
      profile_rate = v;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      Usage("options, then the command;", nullptr);
    } else {
      Usage("unknown option", a);
    }
  }
  if (i >= argc) Usage("no command", nullptr);
  char** cmd = argv + i;
  if (profile_rate != nullptr && profile == nullptr) profile = "./parklot-%p.prof";

  // As a shell says it: 127 for nothing to run, 126 for something that
  // cannot be run (bash, env, perf and valgrind agree).
  char path[PATH_MAX];
  if (const int err = Resolve(cmd[0], path, sizeof(path)); err != 0) {
    if (err == ENOENT && strchr(cmd[0], '/') == nullptr) {
      fprintf(stderr, "parklot: %s: command not found\n", cmd[0]);
    } else {
      fprintf(stderr, "parklot: %s: %s\n", path, strerror(err));
    }
    return err == ENOENT || err == ENOTDIR ? 127 : 126;
  }
  char shim[PATH_MAX];
  if (!FindShim(shim, sizeof(shim))) {
    fprintf(stderr, "parklot: libparklot_preload.so not found beside the launcher\n");
    return 1;
  }

  bool sanitizer = false;
  const char* why = Unserved(path, &sanitizer);
  if (why != nullptr) {
    fprintf(stderr, "parklot: not serving %s: %s; running it on glibc's locks\n", cmd[0], why);
    execv(path, cmd);
    fprintf(stderr, "parklot: %s: %s\n", cmd[0], strerror(errno));
    return errno == ENOENT ? 127 : 126;
  }

  if (futex) setenv("PARKLOT_SYSCALL_FUTEX", "1", 1);
  if (deadlock != nullptr) setenv("PARKLOT_DEADLOCK", deadlock, 1);
  if (profile_rate != nullptr) setenv("PARKLOT_PROFILE_RATE", profile_rate, 1);
  // The shim loads with libc alone: nothing else goes ahead of it, except a
  // sanitizer's runtime.
  char preload[3 * PATH_MAX];
  char san[PATH_MAX];
  const char* old = getenv("LD_PRELOAD");
  if (sanitizer && SanitizerRuntime(path, san, sizeof(san))) {
    fprintf(stderr, "parklot: %s is built with a sanitizer; preloading %s ahead of the shim\n",
            cmd[0], san);
    snprintf(preload, sizeof(preload), "%s:%s%s%s", san, shim, old && *old ? ":" : "",
             old && *old ? old : "");
  } else {
    snprintf(preload, sizeof(preload), "%s%s%s", shim, old && *old ? ":" : "",
             old && *old ? old : "");
  }
  setenv("LD_PRELOAD", preload, 1);

  const bool collect = stats || deadlock != nullptr || profile != nullptr;
  if (!collect) {
    execv(path, cmd);
    fprintf(stderr, "parklot: %s: %s\n", cmd[0], strerror(errno));
    return errno == ENOENT ? 127 : 126;
  }

  // The launcher outlives CMD whatever happens to it, as perf and valgrind
  // do, so that it can always reap CMD and remove its directory: SIGPIPE is
  // ignored (a reader of the reports that left, `| head`, makes writes fail
  // with EPIPE, and the copying just stops), and every other catchable
  // signal that would end it is taken with sigtimedwait and passed to CMD,
  // which then ends or not as it chooses. They are blocked before the
  // directory exists, so none ends the launcher with the directory there.
  // SIGCHLD must not be ignored (an inherited SIG_IGN would reap the child
  // before waitpid sees it).
  const bool pipe_ignored = signal(SIGPIPE, SIG_IGN) == SIG_IGN;
  signal(SIGCHLD, SIG_DFL);
  sigset_t wanted, old_mask;
  sigemptyset(&wanted);
  static const int kSignals[] = {SIGCHLD, SIGINT,  SIGTERM, SIGHUP,    SIGQUIT, SIGALRM, SIGUSR1,
                                 SIGUSR2, SIGPROF, SIGIO,   SIGVTALRM, SIGPWR,  SIGSTKFLT};
  for (int s : kSignals) sigaddset(&wanted, s);
  for (int s = SIGRTMIN; s <= SIGRTMAX; ++s) sigaddset(&wanted, s);
  sigprocmask(SIG_BLOCK, &wanted, &old_mask);

  // The private directory the processes write their reports into.
  const char* tmp = getenv("TMPDIR");
  if (tmp == nullptr || tmp[0] != '/') tmp = "/tmp";
  snprintf(g_dir, sizeof(g_dir), "%s/parklot-run.XXXXXX", tmp);
  if (mkdtemp(g_dir) == nullptr) {
    snprintf(g_dir, sizeof(g_dir), "/tmp/parklot-run.XXXXXX");
    if (mkdtemp(g_dir) == nullptr) {
      fprintf(stderr, "parklot: cannot make a directory for the reports: %s\n", strerror(errno));
      return 1;
    }
  }
  char var[PATH_MAX + 32];
  if (stats) {
    snprintf(var, sizeof(var), "%s/stats.%%p", g_dir);
    setenv("PARKLOT_STATS", var, 1);
  }
  if (stats || deadlock != nullptr) {
    snprintf(var, sizeof(var), "%s/report.%%p", g_dir);
    setenv("PARKLOT_REPORT", var, 1);
  }
  if (profile != nullptr) {
    snprintf(var, sizeof(var), "%s/profile.%%p", g_dir);
    setenv("PARKLOT_PROFILE", var, 1);
  }

  SpawnArgs spawn{path, cmd, &old_mask, !pipe_ignored, getpid(), 0};
  const pid_t child = Spawn(&spawn);
  const int err = child < 0 ? errno : spawn.exec_errno;
  if (child > 0 && err != 0) waitpid(child, nullptr, 0);
  if (err != 0) {
    fprintf(stderr, "parklot: %s: %s\n", cmd[0], strerror(err));
    RemoveDir();
    return err == ENOENT ? 127 : 126;
  }

  int status = 0;
  const struct timespec tick = {0, 200 * 1000 * 1000};
  for (;;) {
    siginfo_t si;
    const int sig = sigtimedwait(&wanted, &si, &tick);
    if (sig > 0 && sig != SIGCHLD) {
      // A terminal's signal (SI_KERNEL) went to the whole foreground
      // process group, the child included: passing it on would deliver it
      // twice.
      if (si.si_code != SI_KERNEL) kill(child, sig);
      continue;
    }
    const pid_t w = waitpid(child, &status, WNOHANG);
    if (w == child) break;
    if (w < 0 && errno != EINTR) {
      status = 1 << 8;
      break;
    }
    Drain();
  }
  Drain();
  if (profile != nullptr) MoveProfiles(profile);
  // Where a report would have said something, silence would leave the user
  // guessing whether the option worked: one line each. Statistics and
  // profiles are written at exit, so only a CMD that exited can be said to
  // have none; a cycle is reported when it is found.
  const bool exited = WIFEXITED(status);
  if (stats && exited && !Found("stats.", nullptr)) {
    fprintf(stderr, "parklot: %s: no lock was served\n", cmd[0]);
  }
  if (profile != nullptr && exited && !Found("profile.", nullptr)) {
    fprintf(stderr, "parklot: %s: no wait was sampled\n", cmd[0]);
  }
  // A detection that never ran (its object did not load) found nothing
  // either, but its report says why: no line then.
  if (deadlock != nullptr && !Found("report.", "parklot: lock-order cycle") &&
      !Found("report.", "parklot: deadlock:") && !Found("report.", "detection off")) {
    fprintf(stderr, "parklot: %s: no lock-order cycle\n", cmd[0]);
  }
  RemoveDir();
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}
