#include "bench/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"

extern char** environ;

namespace parklot::internal {
namespace bench {
namespace {

std::string ErrnoText(const char* what, int err) {
  return absl::StrCat(what, ": ", strerror(err));
}

std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) {
    return absl::StrCat("exit status ", WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return absl::StrFormat("killed by signal %d (%s)", sig, strsignal(sig));
  }
  return absl::StrCat("wait status ", status);
}

// Spawns `path` (looked up in PATH if `search`), with standard output (and
// optionally standard error) into a pipe that is read until EOF or the
// timeout, then reaps it with wait4.
ChildOutcome Spawn(const char* path, bool search,
                   const std::vector<std::string>& argv_text,
                   char* const* envp, const std::string& stdin_path,
                   bool discard_stdout, bool capture_stderr,
                   absl::Duration timeout) {
  ChildOutcome out;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    out.error = ErrnoText("pipe2", errno);
    return out;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 clears FD_CLOEXEC on the new descriptor; both pipe ends close on
  // exec otherwise. "-" keeps the parent's standard input (RunSelf).
  if (stdin_path != "-") {
    posix_spawn_file_actions_addopen(
        &actions, STDIN_FILENO,
        stdin_path.empty() ? "/dev/null" : stdin_path.c_str(), O_RDONLY, 0);
  }
  if (discard_stdout) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null",
                                     O_WRONLY, 0);
  } else {
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  }
  if (capture_stderr) {
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  }

  std::vector<std::string> storage = argv_text;
  std::vector<char*> argv;
  for (std::string& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);

  pid_t pid;
  const absl::Time started = absl::Now();
  const int rc = search ? posix_spawnp(&pid, path, &actions, nullptr,
                                       argv.data(), envp)
                        : posix_spawn(&pid, path, &actions, nullptr,
                                      argv.data(), envp);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    out.error = ErrnoText(absl::StrCat("posix_spawn ", path).c_str(), rc);
    return out;
  }

  const absl::Time deadline = started + timeout;
  bool timed_out = false;
  char buf[4096];
  for (;;) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      timed_out = true;
      break;
    }
    pollfd p = {fds[0], POLLIN, 0};
    const int ms = static_cast<int>(
        std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 60000));
    const int n = poll(&p, 1, ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      out.error = ErrnoText("poll", errno);
      timed_out = true;  // kill it: we can no longer watch it
      break;
    }
    if (n == 0) continue;
    const ssize_t got = read(fds[0], buf, sizeof buf);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      out.error = ErrnoText("read", errno);
      timed_out = true;
      break;
    }
    if (got == 0) break;  // EOF: the child closed its output (exited)
    out.stdout_text.append(buf, static_cast<size_t>(got));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);

  int status = 0;
  rusage ru = {};
  while (wait4(pid, &status, 0, &ru) < 0) {
    if (errno != EINTR) {
      if (out.error.empty()) out.error = ErrnoText("wait4", errno);
      return out;
    }
  }
  out.wall = absl::Now() - started;
  out.cpu = absl::DurationFromTimeval(ru.ru_utime) +
            absl::DurationFromTimeval(ru.ru_stime);
  out.voluntary_switches = ru.ru_nvcsw;
  out.involuntary_switches = ru.ru_nivcsw;
  if (timed_out) {
    if (out.error.empty()) {
      out.error = absl::StrCat("timed out after ",
                               absl::FormatDuration(timeout), " (killed)");
    }
    return out;
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    out.ok = true;
  } else {
    out.error = DescribeStatus(status);
  }
  return out;
}

}  // namespace

ChildOutcome RunSelf(const std::string& argv0,
                     const std::vector<std::string>& args,
                     absl::Duration timeout) {
  std::vector<std::string> argv;
  argv.reserve(args.size() + 1);
  argv.push_back(argv0);
  argv.insert(argv.end(), args.begin(), args.end());
  return Spawn("/proc/self/exe", /*search=*/false, argv, environ,
               /*stdin_path=*/"-", /*discard_stdout=*/false,
               /*capture_stderr=*/false, timeout);
}

ChildOutcome RunProgram(const ProgramSpec& spec) {
  std::vector<std::string> env;
  auto named = [](const std::string& entry, absl::string_view name) {
    return entry.size() > name.size() && entry[name.size()] == '=' &&
           absl::StartsWith(entry, name);
  };
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    bool drop = false;
    for (const std::string& name : spec.unset_env) drop |= named(entry, name);
    for (const std::string& set : spec.set_env) {
      drop |= named(entry, set.substr(0, set.find('=')));
    }
    if (!drop) env.push_back(entry);
  }
  env.insert(env.end(), spec.set_env.begin(), spec.set_env.end());
  std::vector<char*> envp;
  for (std::string& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);

  std::vector<std::string> argv = spec.argv;
  if (argv.empty()) argv.push_back(spec.path);
  return Spawn(spec.path.c_str(),
               spec.path.find('/') == std::string::npos, argv, envp.data(),
               spec.stdin_path, spec.discard_stdout, spec.capture_stderr,
               spec.timeout);
}

}  // namespace bench
}  // namespace parklot::internal
