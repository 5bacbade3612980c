/* What a preload library costs a process that never contends: the CPU
 * time (user + system, from wait4's rusage) to start and end a program,
 * and to start a burst of threads that each take one lock once, and the
 * page faults of each (from the same rusage), under
 * each LD_PRELOAD value given, side by side with none. Configurations run
 * in turn within every round (interleaved); the report gives each one's
 * median [min - max] and its ratio to the plain run.
 *
 *   startup_cost [--rounds=N] [--spawns=N] [--threads=N] [--perf=N]
 *                SELF_OR_PROG NAME=PRELOAD...
 *
 * SELF_OR_PROG is the program each spawn runs (e.g. /bin/true); the
 * thread burst re-runs this binary with --burst=N. "plain" (no preload)
 * always comes first. With --perf=N the start-up figure is perf's instead:
 * `perf stat -r N -x, -e task-clock PROG` per configuration and round (the
 * mean of N runs as perf counts it, CPU from exec to exit), the medians
 * taken over the interleaved rounds. Example:
 *   startup_cost /bin/true jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
 *       parklot=bazel-bin/preload/libparklot_preload.so */
#define _GNU_SOURCE 1
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

enum { kMaxConfigs = 8, kMaxRounds = 64 };

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static long g_taken;

static void* take_once(void* arg) {
  (void)arg;
  pthread_mutex_lock(&g_lock);
  ++g_taken;
  pthread_mutex_unlock(&g_lock);
  return NULL;
}

/* The thread burst: N threads started at once, each locking once. */
static int burst(int n) {
  pthread_t* t = calloc((size_t)n, sizeof(*t));
  if (t == NULL) return 2;
  for (int i = 0; i < n; ++i) {
    if (pthread_create(&t[i], NULL, take_once, NULL) != 0) return 2;
  }
  for (int i = 0; i < n; ++i) pthread_join(t[i], NULL);
  return g_taken == n ? 0 : 1;
}

/* This process's environment with LD_PRELOAD=preload (NULL: none) in
 * place of its own; `var` holds the new entry. Free the result. */
static char** env_with_preload(const char* preload, char var[4096]) {
  size_t n = 0;
  while (environ[n] != NULL) ++n;
  char** env = calloc(n + 2, sizeof(char*));
  if (env == NULL) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0) env[k++] = environ[i];
  }
  if (preload != NULL) {
    snprintf(var, 4096, "LD_PRELOAD=%s", preload);
    env[k++] = var;
  }
  env[k] = NULL;
  return env;
}

/* Runs argv with LD_PRELOAD=preload (NULL: none) `times` times; returns
 * the children's CPU microseconds per run, or -1, and sets *faults to
 * their page faults per run (minor and major: on a machine where a fault
 * is expensive, the count is the cost a preload adds). */
static double run(char* const argv[], const char* preload, int times,
                  double* faults) {
  char var[4096];
  char** env = env_with_preload(preload, var);
  if (env == NULL) return -1;
  double us = 0, flt = 0;
  for (int i = 0; i < times; ++i) {
    pid_t pid;
    if (posix_spawn(&pid, argv[0], NULL, NULL, argv, env) != 0) return -1;
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      fprintf(stderr, "startup_cost: %s failed under %s\n", argv[0],
              preload != NULL ? preload : "no preload");
      return -1;
    }
    us += ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec +
          ru.ru_stime.tv_sec * 1e6 + ru.ru_stime.tv_usec;
    flt += (double)(ru.ru_minflt + ru.ru_majflt);
  }
  free(env);
  *faults = flt / times;
  return us / times;
}

/* `perf stat -r times -x, -e task-clock prog` with LD_PRELOAD=preload
 * (NULL: none) in the environment perf gives the program; returns perf's
 * mean task-clock in microseconds, or -1. */
static double run_perf(const char* prog, const char* preload, int times) {
  char var[4096];
  char** env = env_with_preload(preload, var);
  if (env == NULL) return -1;
  char reps[16];
  snprintf(reps, sizeof(reps), "%d", times);
  char* argv[] = {"perf", "stat", "-r", reps, "-x,", "-e", "task-clock",
                  "--", (char*)prog, NULL};
  int out[2];
  if (pipe(out) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 2);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  pid_t pid;
  const int rc = posix_spawnp(&pid, "perf", &fa, NULL, argv, env);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  free(env);
  if (rc != 0) {
    close(out[0]);
    fprintf(stderr, "startup_cost: cannot run perf\n");
    return -1;
  }
  char text[8192];
  size_t len = 0;
  ssize_t got;
  while (len < sizeof(text) - 1 &&
         (got = read(out[0], text + len, sizeof(text) - 1 - len)) > 0) {
    len += (size_t)got;
  }
  text[len] = '\0';
  close(out[0]);
  int status;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    fprintf(stderr, "startup_cost: perf stat of %s failed under %s:\n%s",
            prog, preload != NULL ? preload : "no preload", text);
    return -1;
  }
  /* CSV: "0.80,msec,task-clock,..." */
  for (char* line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    char* end;
    const double ms = strtod(line, &end);
    if (end != line && strncmp(end, ",msec,task-clock", 16) == 0) return ms * 1e3;
  }
  fprintf(stderr, "startup_cost: no task-clock in perf's output:\n%s", text);
  return -1;
}

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double median(double* v, int n) {
  double s[kMaxRounds];
  memcpy(s, v, sizeof(double) * (size_t)n);
  qsort(s, (size_t)n, sizeof(double), cmp);
  return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void report(const char* what, const char* unit, double scale,
                   const char* names[], double v[][kMaxRounds], int configs,
                   int rounds) {
  printf("%s (%s per run, median [min - max] of %d interleaved rounds)\n",
         what, unit, rounds);
  const double base = median(v[0], rounds);
  for (int c = 0; c < configs; ++c) {
    double lo = v[c][0], hi = v[c][0];
    for (int r = 1; r < rounds; ++r) {
      if (v[c][r] < lo) lo = v[c][r];
      if (v[c][r] > hi) hi = v[c][r];
    }
    const double m = median(v[c], rounds);
    printf("  %-10s %9.3f [%.3f - %.3f]  %+8.3f vs plain  %.2fx\n", names[c],
           m / scale, lo / scale, hi / scale, (m - base) / scale,
           base > 0 ? m / base : 0.0);
  }
}

int main(int argc, char** argv) {
  int rounds = 7, spawns = 100, threads = 1000, perf = 0;
  int i = 1;
  for (; i < argc && strncmp(argv[i], "--", 2) == 0; ++i) {
    if (strncmp(argv[i], "--burst=", 8) == 0) return burst(atoi(argv[i] + 8));
    if (strncmp(argv[i], "--rounds=", 9) == 0) rounds = atoi(argv[i] + 9);
    else if (strncmp(argv[i], "--spawns=", 9) == 0) spawns = atoi(argv[i] + 9);
    else if (strncmp(argv[i], "--threads=", 10) == 0) threads = atoi(argv[i] + 10);
    else if (strncmp(argv[i], "--perf=", 7) == 0) perf = atoi(argv[i] + 7);
    else { fprintf(stderr, "startup_cost: unknown %s\n", argv[i]); return 2; }
  }
  if (i >= argc || rounds < 1 || rounds > kMaxRounds) {
    fprintf(stderr, "usage: startup_cost [--rounds=N<=64] [--spawns=N] "
                    "[--threads=N] [--perf=N] PROG NAME=PRELOAD...\n");
    return 2;
  }
  char* prog = argv[i++];
  const char* names[kMaxConfigs] = {"plain"};
  const char* preloads[kMaxConfigs] = {NULL};
  int configs = 1;
  for (; i < argc && configs < kMaxConfigs; ++i) {
    char* eq = strchr(argv[i], '=');
    if (eq == NULL) { fprintf(stderr, "startup_cost: want NAME=PRELOAD\n"); return 2; }
    *eq = '\0';
    names[configs] = argv[i];
    preloads[configs++] = eq + 1;
  }
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) return 2;
  self[len] = '\0';
  char burst_arg[32];
  snprintf(burst_arg, sizeof(burst_arg), "--burst=%d", threads);
  char* start_argv[] = {prog, NULL};
  char* burst_argv[] = {self, burst_arg, NULL};
  static double start[kMaxConfigs][kMaxRounds], thr[kMaxConfigs][kMaxRounds];
  static double start_faults[kMaxConfigs][kMaxRounds];
  static double thr_faults[kMaxConfigs][kMaxRounds];
  for (int r = 0; r < rounds; ++r) {
    for (int c = 0; c < configs; ++c) {
      /* perf counts CPU only: the faults then come from 10 spawns more. */
      start[c][r] = perf > 0 ? run_perf(prog, preloads[c], perf)
                             : run(start_argv, preloads[c], spawns,
                                   &start_faults[c][r]);
      if (perf > 0 &&
          run(start_argv, preloads[c], 10, &start_faults[c][r]) < 0) {
        return 1;
      }
      thr[c][r] = run(burst_argv, preloads[c], 1, &thr_faults[c][r]);
      if (start[c][r] < 0 || thr[c][r] < 0) return 1;
    }
  }
  char what[256];
  if (perf > 0) {
    snprintf(what, sizeof(what),
             "process start and exit: %s, perf stat -r %d task-clock a round",
             prog, perf);
  } else {
    snprintf(what, sizeof(what), "process start and exit: %s, %d spawns a round",
             prog, spawns);
  }
  report(what, "CPU ms", 1e3, names, start, configs, rounds);
  report(what, "page faults", 1, names, start_faults, configs, rounds);
  snprintf(what, sizeof(what), "thread burst: %d threads, each locks once",
           threads);
  report(what, "CPU ms", 1e3, names, thr, configs, rounds);
  report(what, "page faults", 1, names, thr_faults, configs, rounds);
  return 0;
}
