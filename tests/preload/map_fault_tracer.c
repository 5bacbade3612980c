/* Fault injection for every mapping the shim makes (map_fault_sweep_test),
 * by ptrace: no code in the traced process changes, and nothing is
 * interposed (the shim calls glibc's own definitions, preload/own_libc.c,
 * so an interposed mmap would never see its calls).
 *
 *   map_fault_tracer [--fail=N] [--log=PATH] [--syscall-stops] [--]
 *                    PROGRAM [ARGS...]
 *     --fail=N          fail the N-th counted mapping with ENOMEM (0: none)
 *     --log=PATH        append one line per counted mapping:
 *                       "map_fault: pid P #n SIZE bytes ok|failed"
 *     --syscall-stops   stop every task at every system call
 *                       (PTRACE_SYSCALL) instead of at mmap only
 *
 * Runs PROGRAM (and every thread and process it starts) under ptrace
 * (PTRACE_O_TRACECLONE, TRACEFORK, TRACEVFORK, TRACEEXEC, EXITKILL) and
 * stops each task at each mmap system call, in one of two ways:
 *   - by default, a seccomp filter the tracer's child installs before it
 *     execs PROGRAM (PR_SET_NO_NEW_PRIVS; inherited by every thread and
 *     process) returns SECCOMP_RET_TRACE for mmap and lets every other
 *     system call run: one stop per mmap (PTRACE_EVENT_SECCOMP), the tasks
 *     resumed with PTRACE_CONT. The shim does not look at seccomp state.
 *   - --syscall-stops: no filter; PTRACE_SYSCALL on every task, an entry
 *     and an exit stop for every system call. The same decisions, at about
 *     4x the cost for map_fault_prog's 4,200 threads (each stop of a task
 *     attached early costs the kernel a walk of the tracer's whole list of
 *     tracees in wait(2)): about 10 s a run instead of 3 on 2 cores.
 *
 * A mapping is the shim's if it is made by glibc's mmap wrapper called
 * straight from the shim or its diagnostics object (MapAnonymous,
 * base/anon_mmap.h, the shim's one way to map memory): at the stop (either
 * kind) the task's instruction pointer is just past the wrapper's `syscall`
 * instruction, and the word at the top of its stack is the wrapper's return
 * address, which must lie in an executable mapping of a file named
 * libparklot* (/proc/PID/maps, reread when an address lies in none known). glibc's own mappings (malloc,
 * pthread_create's stacks) pass through the same wrapper but return into
 * libc; the loader's and raw syscall(SYS_mmap) mappings do not stop at the
 * wrapper's instruction at all; neither is counted.
 *
 * That the return address is at [rsp] is exact, not a guess: glibc 2.36's
 * x86-64 mmap64 (sysdeps/unix/sysv/linux/mmap64.c, `objdump -d` of libc.so.6
 * on this machine) pushes nothing and moves no stack pointer before its
 * `syscall`:
 *     41 89 ca              mov    %ecx,%r10d
 *     41 f7 c1 ff 0f 00 00  test   $0xfff,%r9d
 *     75 14                 jne    <EINVAL>
 *     b8 09 00 00 00        mov    $0x9,%eax
 *     0f 05                 syscall
 * The tracer checks those bytes in its own libc and in each traced
 * process's, and exits with status 70 ("FATAL") if they differ, or if a
 * traced process's libc is another file than the tracer's: a different
 * wrapper would need its frame re-derived, not a count that may be wrong.
 *
 * The N-th counted mapping is skipped (orig_rax = -1) and returns -ENOMEM,
 * as the kernel fails a mapping it cannot make (RLIMIT_AS, the map count,
 * strict overcommit): at the seccomp stop, rax set there is what the skipped
 * call returns; with --syscall-stops, rax is set at the exit stop.
 *
 * The count is per process: a process forked (or cloned without
 * CLONE_THREAD) goes on from its parent's count at the fork event, as the
 * counter in process memory of the interposer this replaced did; an exec
 * starts again from 0.
 *
 * Exit status: PROGRAM's, 128 + the signal if a signal ended it, 70 on an
 * error of the tracer's own (with a line on stderr starting
 * "map_fault_tracer:"; never "parklot:"). PTRACE_O_EXITKILL: if the tracer
 * dies (timeout(1)'s SIGTERM), every traced task is killed with it. */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>

enum { kFatal = 70 };

/* glibc 2.36's mmap64 up to and including its `syscall` (see above). */
static const unsigned char kWrapper[] = {
    0x41, 0x89, 0xca,                         /* mov %ecx,%r10d */
    0x41, 0xf7, 0xc1, 0xff, 0x0f, 0x00, 0x00, /* test $0xfff,%r9d */
    0x75, 0x14,                               /* jne EINVAL */
    0xb8, 0x09, 0x00, 0x00, 0x00,             /* mov $SYS_mmap,%eax */
    0x0f, 0x05,                               /* syscall */
};

static void fatal(const char* fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void fatal(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("map_fault_tracer: FATAL: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(kFatal); /* PTRACE_O_EXITKILL ends the traced tasks */
}

/* The tracer's libc: its file (by device and inode) and where mmap64 lies
 * in it. */
static dev_t g_libc_dev;
static ino_t g_libc_ino;
static uintptr_t g_wrapper_offset; /* of the wrapper's entry, from libc's base */

static void find_own_wrapper(void) {
  void* fn = dlvsym(RTLD_DEFAULT, "mmap64", "GLIBC_2.2.5");
  Dl_info info;
  if (fn == NULL || dladdr(fn, &info) == 0 || info.dli_fname == NULL) {
    fatal("cannot find the tracer's own mmap64 in libc");
  }
  const char* base = strrchr(info.dli_fname, '/');
  base = base != NULL ? base + 1 : info.dli_fname;
  if (strcmp(base, "libc.so.6") != 0) {
    fatal("mmap64 is defined by %s, not libc.so.6", info.dli_fname);
  }
  if (memcmp(fn, kWrapper, sizeof(kWrapper)) != 0) {
    char hex[3 * sizeof(kWrapper) + 1];
    for (size_t i = 0; i < sizeof(kWrapper); ++i) {
      snprintf(hex + 3 * i, 4, "%02x ", ((const unsigned char*)fn)[i]);
    }
    fatal("%s's mmap64 is not glibc 2.36's wrapper (%s); the frame at its "
          "syscall must be re-derived (objdump -d) before counting",
          info.dli_fname, hex);
  }
  struct stat st;
  if (stat(info.dli_fname, &st) != 0) fatal("stat %s: %s", info.dli_fname, strerror(errno));
  g_libc_dev = st.st_dev;
  g_libc_ino = st.st_ino;
  g_wrapper_offset = (uintptr_t)fn - (uintptr_t)info.dli_fbase;
}

/* A process (thread group) and what the tracer knows of its mappings. */
struct Range {
  uintptr_t lo, hi;
  int parklot;
};

struct Proc {
  int refs;
  pid_t pid;         /* tgid, for the log */
  unsigned long count;
  uintptr_t site;    /* the address just past the wrapper's syscall; 0: libc not seen */
  struct Range* exec; /* executable mappings */
  size_t n_exec, cap_exec;
};

struct Task {
  struct Proc* proc;     /* NULL until its parent's clone event is seen */
  int started;           /* its first stop has been seen */
  int held;              /* stopped at its first stop, waiting for proc */
  int failing;           /* in the system call being failed (--syscall-stops) */
};

static struct Task** g_tasks;
static long g_max_tid;
static long g_fail_at;
static int g_syscall_stops;
static int g_log_fd = -1;

static struct Task* task(pid_t tid, int create) {
  if (tid <= 0 || tid >= g_max_tid) fatal("task id %d out of range", tid);
  if (g_tasks[tid] == NULL && create) {
    g_tasks[tid] = calloc(1, sizeof(struct Task));
    if (g_tasks[tid] == NULL) fatal("out of memory");
  }
  return g_tasks[tid];
}

static struct Proc* new_proc(pid_t pid) {
  struct Proc* p = calloc(1, sizeof(struct Proc));
  if (p == NULL) fatal("out of memory");
  p->pid = pid;
  return p;
}

static void put_proc(struct Proc* p) {
  if (p != NULL && --p->refs == 0) {
    free(p->exec);
    free(p);
  }
}

static void set_proc(struct Task* t, struct Proc* p) {
  ++p->refs;
  put_proc(t->proc);
  t->proc = p;
}

static int read_mem(pid_t tid, uintptr_t addr, void* buf, size_t len) {
  struct iovec local = {buf, len};
  struct iovec remote = {(void*)addr, len};
  return process_vm_readv(tid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

/* Rereads the process's executable mappings from /proc/TID/maps; finds
 * libc's mmap64 and checks its bytes. */
static void refresh(struct Proc* p, pid_t tid) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/maps", tid);
  FILE* f = fopen(path, "re");
  if (f == NULL) return; /* the task is gone */
  p->n_exec = 0;
  uintptr_t libc_base = 0;
  int libc_seen = 0;
  struct Range libc_text[8];
  size_t n_libc_text = 0;
  char line[4096];
  while (fgets(line, sizeof(line), f) != NULL) {
    unsigned long lo, hi, off, ino;
    unsigned maj, mnr;
    char perms[8];
    int name_at = 0;
    if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %n", &lo, &hi, perms, &off, &maj,
               &mnr, &ino, &name_at) < 7) {
      continue;
    }
    char* name = line + name_at;
    name[strcspn(name, "\n")] = '\0';
    const char* base = strrchr(name, '/');
    base = base != NULL ? base + 1 : name;
    if (strcmp(base, "libc.so.6") == 0) {
      libc_seen = 1;
      if (perms[2] == 'x' && n_libc_text < 8) libc_text[n_libc_text++] = (struct Range){lo, hi, 0};
      if (ino != (unsigned long)g_libc_ino || makedev(maj, mnr) != g_libc_dev) {
        fatal("process %d maps %s (inode %lu), not the tracer's libc (inode %lu)",
              p->pid, name, ino, (unsigned long)g_libc_ino);
      }
      if (off == 0 && libc_base == 0) libc_base = lo;
    }
    if (perms[2] != 'x') continue;
    if (p->n_exec == p->cap_exec) {
      p->cap_exec = p->cap_exec ? 2 * p->cap_exec : 64;
      p->exec = realloc(p->exec, p->cap_exec * sizeof(struct Range));
      if (p->exec == NULL) fatal("out of memory");
    }
    p->exec[p->n_exec++] =
        (struct Range){lo, hi, strncmp(base, "libparklot", 10) == 0};
  }
  fclose(f);
  if (libc_seen && libc_base == 0) fatal("process %d: no libc mapping at offset 0", p->pid);
  if (libc_base != 0 && p->site == 0) {
    unsigned char code[sizeof(kWrapper)];
    const uintptr_t entry = libc_base + g_wrapper_offset;
    int in_text = 0;
    for (size_t i = 0; i < n_libc_text; ++i) {
      in_text |= entry >= libc_text[i].lo && entry + sizeof(code) <= libc_text[i].hi;
    }
    /* Not yet: the loader maps libc in steps, its text last. */
    if (!in_text) return;
    if (read_mem(tid, entry, code, sizeof(code)) != 0) {
      fatal("process %d: cannot read libc's text at %#lx: %s", p->pid,
            (unsigned long)entry, strerror(errno));
    }
    if (memcmp(code, kWrapper, sizeof(kWrapper)) != 0) {
      fatal("process %d: libc's mmap64 at %#lx is not the wrapper the tracer "
            "checked in its own libc", p->pid, (unsigned long)entry);
    }
    p->site = entry + sizeof(kWrapper);
  }
}

/* -1: in no executable mapping known; 0: not the shim's; 1: the shim's. */
static int classify(const struct Proc* p, uintptr_t pc) {
  for (size_t i = 0; i < p->n_exec; ++i) {
    if (pc >= p->exec[i].lo && pc < p->exec[i].hi) return p->exec[i].parklot;
  }
  return -1;
}

/* An mmap about to run in task `tid`, stopped just past its `syscall`
 * instruction at `ip` with stack pointer `sp`. Returns whether to fail it. */
static int on_mmap(pid_t tid, struct Task* t, uint64_t ip, uint64_t sp, uint64_t len) {
  struct Proc* p = t->proc;
  if (p->site == 0) refresh(p, tid);
  if (p->site == 0 || ip != p->site) return 0;
  /* Stopped just past the wrapper's syscall, which pushed nothing: [rsp]
   * is the wrapper's return address, in its caller. */
  errno = 0;
  const long word = ptrace(PTRACE_PEEKDATA, tid, (void*)sp, NULL);
  if (errno != 0) fatal("task %d: reading its stack: %s", tid, strerror(errno));
  const uintptr_t ret = (uintptr_t)word;
  int c = classify(p, ret);
  if (c < 0) {
    refresh(p, tid); /* a newly loaded object (the diagnostics object) */
    c = classify(p, ret);
  }
  if (c < 0) {
    fatal("task %d: mmap64 returns to %#lx, in no executable mapping", tid,
          (unsigned long)ret);
  }
  if (c == 0) return 0;
  const unsigned long n = ++p->count;
  const int fail = g_fail_at > 0 && n == (unsigned long)g_fail_at;
  if (g_log_fd >= 0) {
    dprintf(g_log_fd, "map_fault: pid %d #%lu %llu bytes %s\n", p->pid, n,
            (unsigned long long)len, fail ? "failed" : "ok");
  }
  return fail;
}

/* Skips the system call task `tid` is stopped at; with `ret`, sets what it
 * returns (at a seccomp stop; at a syscall-entry stop the exit stop does). */
static void skip_syscall(pid_t tid, int set_ret, long ret) {
  struct user_regs_struct regs;
  if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) != 0) fatal("GETREGS: %s", strerror(errno));
  regs.orig_rax = (unsigned long long)-1; /* no system call */
  if (set_ret) regs.rax = (unsigned long long)ret;
  if (ptrace(PTRACE_SETREGS, tid, NULL, &regs) != 0) fatal("SETREGS: %s", strerror(errno));
}

static void set_return(pid_t tid, long ret) {
  struct user_regs_struct regs;
  if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) != 0) fatal("GETREGS: %s", strerror(errno));
  regs.rax = (unsigned long long)ret;
  if (ptrace(PTRACE_SETREGS, tid, NULL, &regs) != 0) fatal("SETREGS: %s", strerror(errno));
}

static int syscall_info(pid_t tid, struct __ptrace_syscall_info* info) {
  if (ptrace(PTRACE_GET_SYSCALL_INFO, tid, (void*)sizeof(*info), info) > 0) return 1;
  if (errno == ESRCH) return 0; /* killed meanwhile */
  fatal("task %d: PTRACE_GET_SYSCALL_INFO: %s", tid, strerror(errno));
}

/* A PTRACE_EVENT_SECCOMP stop: the filter traces mmap only. */
static void on_seccomp_stop(pid_t tid, struct Task* t) {
  struct __ptrace_syscall_info info;
  if (!syscall_info(tid, &info)) return;
  if (info.op != PTRACE_SYSCALL_INFO_SECCOMP || info.seccomp.nr != SYS_mmap) {
    fatal("task %d: a seccomp stop for system call %llu, not mmap", tid,
          (unsigned long long)info.seccomp.nr);
  }
  if (on_mmap(tid, t, info.instruction_pointer, info.stack_pointer, info.seccomp.args[1])) {
    skip_syscall(tid, 1, -ENOMEM);
  }
}

/* A syscall-entry or -exit stop (--syscall-stops). */
static void on_syscall_stop(pid_t tid, struct Task* t) {
  struct __ptrace_syscall_info info;
  if (!syscall_info(tid, &info)) return;
  if (info.op == PTRACE_SYSCALL_INFO_ENTRY && info.entry.nr == SYS_mmap) {
    if (on_mmap(tid, t, info.instruction_pointer, info.stack_pointer, info.entry.args[1])) {
      skip_syscall(tid, 0, 0);
      t->failing = 1;
    }
  } else if (info.op == PTRACE_SYSCALL_INFO_EXIT && t->failing) {
    t->failing = 0;
    set_return(tid, -ENOMEM);
  }
}

static void resume(pid_t tid, int sig) {
  if (ptrace(g_syscall_stops ? PTRACE_SYSCALL : PTRACE_CONT, tid, NULL, (void*)(long)sig) != 0 &&
      errno != ESRCH) {
    fatal("resuming task %d: %s", tid, strerror(errno));
  }
}

/* The parent `tid` reported a new task (a clone, fork or vfork event). */
static void on_new_task(pid_t tid, struct Task* t, int event) {
  unsigned long msg = 0;
  if (ptrace(PTRACE_GETEVENTMSG, tid, NULL, &msg) != 0) fatal("GETEVENTMSG: %s", strerror(errno));
  const pid_t child = (pid_t)msg;
  struct Task* c = task(child, 1);
  /* A clone event is a thread (CLONE_THREAD) or a process with an exit
   * signal other than SIGCHLD: a thread is listed in its group's task/. */
  int thread = 0;
  if (event == PTRACE_EVENT_CLONE) {
    char path[64];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%d/task/%d", t->proc->pid, child);
    thread = stat(path, &st) == 0;
  }
  if (thread) {
    set_proc(c, t->proc);
  } else {
    struct Proc* p = new_proc(child);
    p->count = t->proc->count;
    p->site = t->proc->site; /* the same mappings, until an exec */
    if (t->proc->n_exec > 0) {
      p->exec = malloc(t->proc->n_exec * sizeof(struct Range));
      if (p->exec == NULL) fatal("out of memory");
      memcpy(p->exec, t->proc->exec, t->proc->n_exec * sizeof(struct Range));
      p->n_exec = p->cap_exec = t->proc->n_exec;
    }
    set_proc(c, p);
  }
  if (c->held) { /* its first stop came first */
    c->held = 0;
    resume(child, 0);
  }
}

static int parse_long(const char* s, long* out) {
  char* end;
  errno = 0;
  *out = strtol(s, &end, 10);
  return errno == 0 && end != s && *end == '\0' && *out >= 0;
}

int main(int argc, char** argv) {
  const char* log_path = NULL;
  int i = 1;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    if (strcmp(argv[i], "--") == 0) {
      ++i;
      break;
    } else if (strncmp(argv[i], "--fail=", 7) == 0) {
      if (!parse_long(argv[i] + 7, &g_fail_at)) fatal("bad %s", argv[i]);
    } else if (strcmp(argv[i], "--syscall-stops") == 0) {
      g_syscall_stops = 1;
    } else if (strncmp(argv[i], "--log=", 6) == 0) {
      log_path = argv[i] + 6;
    } else {
      fatal("unknown option %s", argv[i]);
    }
  }
  if (i >= argc) {
    fprintf(stderr, "usage: map_fault_tracer [--fail=N] [--log=PATH] [--syscall-stops] [--] PROGRAM [ARGS...]\n");
    return 2;
  }
  find_own_wrapper();
  if (log_path != NULL && *log_path != '\0') {
    g_log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (g_log_fd < 0) fatal("open %s: %s", log_path, strerror(errno));
  }
  {
    FILE* f = fopen("/proc/sys/kernel/pid_max", "re");
    g_max_tid = 4194304;
    if (f != NULL) {
      if (fscanf(f, "%ld", &g_max_tid) != 1) g_max_tid = 4194304;
      fclose(f);
    }
    ++g_max_tid;
    g_tasks = calloc((size_t)g_max_tid, sizeof(*g_tasks));
    if (g_tasks == NULL) fatal("out of memory");
  }

  const pid_t root = fork();
  if (root < 0) fatal("fork: %s", strerror(errno));
  if (root == 0) {
    if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) {
      fprintf(stderr, "map_fault_tracer: FATAL: PTRACE_TRACEME: %s\n", strerror(errno));
      _exit(kFatal);
    }
    raise(SIGSTOP);
    if (!g_syscall_stops) {
      /* mmap stops for the tracer; everything else runs. */
      struct sock_filter filter[] = {
          BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 3),
          BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mmap, 0, 1),
          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE),
          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      };
      struct sock_fprog prog = {sizeof(filter) / sizeof(filter[0]), filter};
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
          prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        fprintf(stderr, "map_fault_tracer: FATAL: seccomp filter: %s\n", strerror(errno));
        _exit(kFatal);
      }
    }
    execvp(argv[i], argv + i);
    fprintf(stderr, "map_fault_tracer: FATAL: exec %s: %s\n", argv[i], strerror(errno));
    _exit(kFatal);
  }
  int st;
  if (waitpid(root, &st, 0) != root) fatal("waitpid: %s", strerror(errno));
  if (!WIFSTOPPED(st)) fatal("the child did not stop (status %#x)", st);
  if (ptrace(PTRACE_SETOPTIONS, root, NULL,
             (void*)(long)(PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACECLONE |
                           PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
                           PTRACE_O_TRACEEXEC | PTRACE_O_TRACESECCOMP |
                           PTRACE_O_EXITKILL)) != 0) {
    fatal("PTRACE_SETOPTIONS: %s", strerror(errno));
  }
  struct Task* rt = task(root, 1);
  rt->started = 1;
  set_proc(rt, new_proc(root));
  resume(root, 0);

  int root_status = -1;
  for (;;) {
    const pid_t tid = waitpid(-1, &st, __WALL);
    if (tid < 0) {
      if (errno == EINTR) continue;
      if (errno == ECHILD) break;
      fatal("waitpid: %s", strerror(errno));
    }
    if (WIFEXITED(st) || WIFSIGNALED(st)) {
      if (tid == root) root_status = st;
      struct Task* t = task(tid, 0);
      if (t != NULL) {
        put_proc(t->proc);
        free(t);
        g_tasks[tid] = NULL;
      }
      continue;
    }
    if (!WIFSTOPPED(st)) continue;
    struct Task* t = task(tid, 1);
    const int sig = WSTOPSIG(st);
    const int event = st >> 16;
    if (!t->started) {
      /* A new task's first stop (SIGSTOP, from the automatic attach). */
      t->started = 1;
      if (t->proc == NULL) {
        t->held = 1; /* resumed when its parent's event names it */
      } else {
        resume(tid, 0);
      }
      continue;
    }
    if (sig == (SIGTRAP | 0x80)) {
      on_syscall_stop(tid, t);
      resume(tid, 0);
    } else if (sig == SIGTRAP && event != 0) {
      switch (event) {
        case PTRACE_EVENT_CLONE:
        case PTRACE_EVENT_FORK:
        case PTRACE_EVENT_VFORK:
          on_new_task(tid, t, event);
          break;
        case PTRACE_EVENT_SECCOMP:
          on_seccomp_stop(tid, t);
          break;
        case PTRACE_EVENT_EXEC: {
          unsigned long former = 0;
          if (ptrace(PTRACE_GETEVENTMSG, tid, NULL, &former) == 0 &&
              (pid_t)former != tid && task((pid_t)former, 0) != NULL) {
            /* A thread other than the leader exec'd: it takes the
             * leader's id. */
            struct Task* f = g_tasks[former];
            g_tasks[former] = NULL;
            put_proc(f->proc);
            free(f);
          }
          set_proc(t, new_proc(tid));
          t->failing = 0;
          break;
        }
        default:
          break;
      }
      resume(tid, 0);
    } else {
      resume(tid, sig); /* a signal for the task: deliver it */
    }
  }
  if (g_log_fd >= 0) close(g_log_fd);
  if (root_status == -1) fatal("lost the program's exit status");
  if (WIFEXITED(root_status)) return WEXITSTATUS(root_status);
  return 128 + WTERMSIG(root_status);
}
