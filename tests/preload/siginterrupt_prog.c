/* siginterrupt() then signal(): glibc's signal() installs the handler
 * without SA_RESTART for a signal that siginterrupt(sig, 1) made
 * interrupting, so a blocking read() fails with EINTR when it arrives (the
 * classic alarm-timeout idiom). The shim's signal() once always set
 * SA_RESTART (glibc keeps siginterrupt's set hidden), so the read was
 * restarted and the program hung. */
#include "tests/preload/shim_test_util.h"  /* first: _GNU_SOURCE */

static void on_signal(int sig) { (void)sig; }

struct kick {
  pthread_t target;
  int sig;
  int write_fd;  /* >= 0: write one byte after the signal */
};

static void* kicker(void* arg) {
  const struct kick* k = (const struct kick*)arg;
  shim_sleep_ms(100);  /* the reader blocks meanwhile */
  pthread_kill(k->target, k->sig);
  if (k->write_fd >= 0) {
    shim_sleep_ms(100);
    const char c = 'x';
    CHECK(write(k->write_fd, &c, 1) == 1);
  }
  return NULL;
}

static int sa_restart(int sig) {
  struct sigaction sa;
  CHECK_RC(sigaction(sig, NULL, &sa), 0);
  return (sa.sa_flags & SA_RESTART) != 0;
}

/* A read on an empty pipe, signalled `sig` meanwhile; returns read()'s
 * result, with errno. */
static ssize_t kicked_read(int sig, int write_after) {
  int p[2];
  if (pipe(p) != 0) FATAL("pipe: %s", strerror(errno));
  struct kick k = {pthread_self(), sig, write_after ? p[1] : -1};
  pthread_t t = shim_spawn(kicker, &k);
  char c;
  const ssize_t n = read(p[0], &c, 1);
  const int saved = errno;
  pthread_join(t, NULL);
  close(p[0]);
  close(p[1]);
  errno = saved;
  return n;
}

int main(void) {
  shim_test_start("siginterrupt", 20);
  /* Interrupting before signal(): no SA_RESTART, the read fails. */
  CHECK_RC(siginterrupt(SIGUSR1, 1), 0);
  CHECK(signal(SIGUSR1, on_signal) != SIG_ERR);
  CHECK(!sa_restart(SIGUSR1));
  errno = 0;
  CHECK(kicked_read(SIGUSR1, 0) == -1 && errno == EINTR);

  /* Restarting again, then signal(): the read goes on and gets the byte. */
  CHECK_RC(siginterrupt(SIGUSR1, 0), 0);
  CHECK(sa_restart(SIGUSR1));
  CHECK(signal(SIGUSR1, on_signal) != SIG_ERR);
  CHECK(sa_restart(SIGUSR1));
  CHECK(kicked_read(SIGUSR1, 1) == 1);

  /* After signal(): siginterrupt changes the installed action. */
  CHECK(signal(SIGUSR2, on_signal) != SIG_ERR);
  CHECK(sa_restart(SIGUSR2));
  CHECK_RC(siginterrupt(SIGUSR2, 1), 0);
  CHECK(!sa_restart(SIGUSR2));
  errno = 0;
  CHECK(kicked_read(SIGUSR2, 0) == -1 && errno == EINTR);

  /* Invalid signals. */
  errno = 0;
  CHECK(siginterrupt(0, 1) == -1 && errno == EINVAL);
  errno = 0;
  CHECK(siginterrupt(NSIG, 1) == -1 && errno == EINVAL);
  return shim_test_finish();
}
