#include "bench/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

extern char** environ;

namespace parklot {
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

}  // namespace

ChildOutcome RunSelf(const std::string& argv0,
                     const std::vector<std::string>& args,
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
  // exec otherwise.
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);

  std::vector<std::string> storage;
  storage.reserve(args.size() + 1);
  storage.push_back(argv0);
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : storage) argv.push_back(s.data());
  argv.push_back(nullptr);

  pid_t pid;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr,
                             argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    out.error = ErrnoText("posix_spawn /proc/self/exe", rc);
    return out;
  }

  const absl::Time deadline = absl::Now() + timeout;
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
    if (got == 0) break;  // EOF: the child closed its stdout (exited)
    out.stdout_text.append(buf, static_cast<size_t>(got));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);

  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      if (out.error.empty()) out.error = ErrnoText("waitpid", errno);
      return out;
    }
  }
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

}  // namespace bench
}  // namespace parklot
