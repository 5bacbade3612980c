#include "preload/diag/report.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <string_view>

#include "base/anon_mmap.h"
#include "base/text.h"
#include "hash/bucket_table.h"
#include "preload/diag/deadlock.h"

namespace parklot::internal::preload {
namespace {

struct SinkState {
  char path[PATH_MAX] = "";  // empty: stderr, unless too_long
  bool per_pid = false;      // the path has %p
  bool too_long = false;     // a path was given that does not fit
};
PARKLOT_LARGE_BSS SinkState g_sinks[3];
pid_t g_start_pid = 0;
// The executable's full path: dladdr names it by argv[0], which may be
// relative to a directory the reader is not in.
PARKLOT_LARGE_BSS char g_exe[PATH_MAX];

SinkState& StateOf(Sink sink) { return g_sinks[static_cast<int>(sink)]; }

void SetPath(SinkState* s, const char* path) {
  if (path == nullptr) return;
  if (strlen(path) >= sizeof(s->path)) {
    s->too_long = true;
    return;
  }
  strcpy(s->path, path);
  s->per_pid = strstr(path, "%p") != nullptr;
}

// The path with %p and %% expanded; false if it does not fit.
bool ExpandPath(const char* tmpl, char* out, size_t size) {
  char pid[24];
  const int pid_len = snprintf(pid, sizeof(pid), "%d", getpid());
  size_t n = 0;
  for (const char* p = tmpl; *p != '\0'; ++p) {
    if (p[0] == '%' && (p[1] == 'p' || p[1] == '%')) {
      const char* add = p[1] == 'p' ? pid : "%";
      const size_t len = p[1] == 'p' ? static_cast<size_t>(pid_len) : 1;
      if (n + len >= size) return false;
      memcpy(out + n, add, len);
      n += len;
      ++p;
    } else {
      if (n + 1 >= size) return false;
      out[n++] = *p;
    }
  }
  out[n] = '\0';
  return true;
}

bool WriteAll(int fd, std::string_view text) {
  return WriteAllNoSigpipe(fd, text.data(), text.size());
}

// What the sink is called in a line about it.
const char* SinkName(Sink sink) {
  switch (sink) {
    case Sink::kStats:
      return "statistics report (PARKLOT_STATS)";
    case Sink::kReport:
      return "diagnostic report (PARKLOT_REPORT)";
    case Sink::kProfile:
      return "contention profile (PARKLOT_PROFILE)";
  }
  return "report";
}

// The one line on stderr that says a report was not written: which, where,
// the step that failed and errno's name (strerrorname_np: a constant string,
// no locale, async-signal-safe as strerror is not).
void SayNotWritten(Sink sink, const char* path, const char* step, int err) {
  char line[PATH_MAX + 160];
  const char* name = err != 0 ? strerrorname_np(err) : nullptr;
  const int n = snprintf(
      line, sizeof(line), "parklot: %s not written to %.*s: %s%s%s\n",
      SinkName(sink), 256, path, step, name != nullptr ? " " : "",
      name != nullptr ? name : "");
  if (n > 0) {
    WriteAll(STDERR_FILENO,
             std::string_view(line, static_cast<size_t>(n) < sizeof(line)
                                         ? static_cast<size_t>(n)
                                         : sizeof(line) - 1));
  }
}

// Opens the report file `path` for appending, as docs/design.md section 6,
// invariant 8 asks: never through a symbolic link in its last component
// (O_NOFOLLOW), created private to the user (0600), never a terminal's
// controlling device (O_NOCTTY), and only a regular file (a FIFO without a
// reader is refused at once, O_NONBLOCK, rather than blocking the exit).
// `mode`: O_APPEND (reports add up) or O_TRUNC (a file holds one profile).
// Returns the descriptor, or -1 with `*step` and errno saying what failed.
int OpenReportFile(const char* path, int mode, const char** step) {
  // What is there already must be a regular file before it is opened: the
  // open of a device node can act (a watchdog arms, a tape rewinds) even
  // when the fstat below then refuses it. The fstat still decides (the
  // path may change between the two).
  struct stat before;
  if (lstat(path, &before) == 0 && !S_ISREG(before.st_mode)) {
    // The errors the open would give, where it gives one.
    *step = "not a regular file";
    errno = 0;
    if (S_ISLNK(before.st_mode) || S_ISDIR(before.st_mode)) {
      *step = "open refused,";
      errno = S_ISLNK(before.st_mode) ? ELOOP : EISDIR;
    }
    return -1;
  }
  const int fd = open(path,
                      O_WRONLY | O_CREAT | mode | O_CLOEXEC | O_NOFOLLOW |
                          O_NOCTTY | O_NONBLOCK,
                      0600);
  if (fd < 0) {
    *step = "open failed,";
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    *step = "fstat failed,";
    const int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    *step = "not a regular file";
    close(fd);
    errno = 0;
    return -1;
  }
  return fd;
}

// Where the call at return address `pc` lives, as addr2line reads it:
// `pc - 1` (inside the call instruction) less the load base for a
// position-independent object. Module name from dladdr.
bool ModuleAddress(uintptr_t pc, const char** module, uintptr_t* addr) {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(pc - 1), &info) == 0 ||
      info.dli_fbase == nullptr) {
    return false;
  }
  *module = info.dli_fname != nullptr && info.dli_fname[0] != '\0'
                ? info.dli_fname
                : "?";
  if (g_exe[0] != '\0' && program_invocation_name != nullptr &&
      strcmp(*module, program_invocation_name) == 0) {
    *module = g_exe;
  }
  const auto* ehdr = static_cast<const Elf64_Ehdr*>(info.dli_fbase);
  const uintptr_t base = ehdr->e_type == ET_EXEC
                             ? 0
                             : reinterpret_cast<uintptr_t>(info.dli_fbase);
  *addr = pc - 1 - base;
  return true;
}

}  // namespace

void InitReportSinks(const Config& config) {
  g_start_pid = getpid();
  SetPath(&StateOf(Sink::kStats), config.stats_path);
  SetPath(&StateOf(Sink::kReport), config.report_path);
  SetPath(&StateOf(Sink::kProfile), config.profile_path);
  const ssize_t n = readlink("/proc/self/exe", g_exe, sizeof(g_exe) - 1);
  g_exe[n > 0 ? n : 0] = '\0';
}

void WriteReport(Sink sink, std::string_view text) {
  // Secure mode writes nothing (docs/design.md section 6, invariant 8); the
  // configuration already turns every report off there, this keeps it so for
  // any caller.
  if (SecureMode()) return;
  const int saved_errno = errno;  // the program's errno, as glibc leaves it
  const SinkState& s = StateOf(sink);
  if (s.too_long) {
    SayNotWritten(sink, "a path", "longer than PATH_MAX", 0);
  } else if (s.path[0] == '\0') {
    WriteAll(STDERR_FILENO, text);
  } else {
    char path[PATH_MAX];
    const char* step = "";
    if (!ExpandPath(s.path, path, sizeof(path))) {
      SayNotWritten(sink, s.path, "longer than PATH_MAX with %p expanded", 0);
    } else if (const int fd = OpenReportFile(path, O_APPEND, &step); fd < 0) {
      SayNotWritten(sink, path, step, errno);
    } else {
      // A file that takes no write (a full disk, /proc/self/mem) says so.
      if (!WriteAll(fd, text)) SayNotWritten(sink, path, "write", errno);
      close(fd);
    }
  }
  errno = saved_errno;
}

ReportFile::ReportFile(Sink sink, const char* suffix) {
  if (SecureMode()) return;  // as WriteReport
  const int saved_errno = errno;
  const SinkState& s = StateOf(sink);
  char path[PATH_MAX];
  const char* step = "";
  const size_t suffix_len = strlen(suffix);
  if (s.too_long) {
    SayNotWritten(sink, "a path", "longer than PATH_MAX", 0);
  } else if (s.path[0] == '\0') {
    // No path, no profile: the configuration asks for one.
  } else if (!ExpandPath(s.path, path, sizeof(path) - suffix_len)) {
    SayNotWritten(sink, s.path, "longer than PATH_MAX with %p expanded", 0);
  } else {
    strcat(path, suffix);
    fd_ = OpenReportFile(path, O_TRUNC, &step);
    if (fd_ < 0) SayNotWritten(sink, path, step, errno);
  }
  errno = saved_errno;
}

ReportFile::~ReportFile() {
  if (fd_ < 0) return;
  const int saved_errno = errno;
  Flush();
  close(fd_);
  errno = saved_errno;
}

void ReportFile::Flush() {
  WriteAllNoSigpipe(fd_, buf_, used_);
  used_ = 0;
}

void ReportFile::Append(const char* data, size_t size) {
  if (fd_ < 0) return;
  while (size > 0) {
    if (used_ == sizeof(buf_)) {
      const int saved_errno = errno;
      Flush();
      errno = saved_errno;
    }
    const size_t n = size < sizeof(buf_) - used_ ? size : sizeof(buf_) - used_;
    memcpy(buf_ + used_, data, n);
    used_ += n;
    data += n;
    size -= n;
  }
}

void ReportFile::Append(const char* text) { Append(text, strlen(text)); }

void ReportFile::AppendDecimal(unsigned long long n) {
  char digits[24];
  size_t i = sizeof(digits);
  do {
    digits[--i] = static_cast<char>('0' + n % 10);
    n /= 10;
  } while (n != 0);
  Append(digits + i, sizeof(digits) - i);
}

void ReportFile::AppendHex(unsigned long long n) {
  char digits[24];
  size_t i = sizeof(digits);
  do {
    digits[--i] = "0123456789abcdef"[n % 16];
    n /= 16;
  } while (n != 0);
  digits[--i] = 'x';
  digits[--i] = '0';
  Append(digits + i, sizeof(digits) - i);
}

bool ReportFile::AppendFileContents(const char* path) {
  if (fd_ < 0) return false;
  const int saved_errno = errno;
  const int in = open(path, O_RDONLY | O_CLOEXEC);
  if (in < 0) {
    errno = saved_errno;
    return false;
  }
  char chunk[4096];
  for (;;) {
    const ssize_t n = read(in, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    Append(chunk, static_cast<size_t>(n));
  }
  close(in);
  errno = saved_errno;
  return true;
}

const char* ExecutablePath() { return g_exe; }

bool ReportsAtUnderscoreExit(Sink sink) {
  return getpid() == g_start_pid || StateOf(sink).per_pid;
}

void DescribeCallSite(const void* pc, char* buf, size_t size) {
  if (size == 0) return;
  const auto ret = reinterpret_cast<uintptr_t>(pc);
  if (ret == 0) {
    snprintf(buf, size, "?");
    return;
  }
  const char* module;
  uintptr_t addr;
  if (!ModuleAddress(ret, &module, &addr)) {
    snprintf(buf, size, "%#lx", ret);
    return;
  }
  char name[512];
  uintptr_t offset;
  if (g_diag.describe_line != nullptr &&
      g_diag.describe_line(ret - 1, name, sizeof(name))) {
    snprintf(buf, size, "%s (%s+%#lx)", name, module, addr);
    return;
  }
  // The symbolizer is the diagnostics object's (deadlock.h:
  // LoadDiagnostics); without it, the module address alone. Abseil's
  // symbolizer aborts when its arena cannot map memory: with memory that
  // short, the module address alone too.
  if (g_diag.symbolize != nullptr && CanMapNow(size_t{1} << 20) &&
      g_diag.symbolize(ret - 1, name, sizeof(name), &offset)) {
    snprintf(buf, size, "%s+%#lx (%s+%#lx)", name, offset, module, addr);
  } else {
    snprintf(buf, size, "%s+%#lx", module, addr);
  }
}

bool DescribeLock(uintptr_t lock, char* buf, size_t size) {
  if (size == 0) return false;
  if (g_diag.name_lock != nullptr && g_diag.name_lock(lock, buf, size)) {
    return true;
  }
  snprintf(buf, size, "%#lx", lock);
  return false;
}

}  // namespace parklot::internal::preload
