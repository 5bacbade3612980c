// Locks in recycled memory, for deadlock_churn_test.sh (PARKLOT_DEADLOCK):
// objects holding a lock are made, locked in a consistent order (the one
// made first, then the other), and freed, many times over; the allocator
// hands the next pair the same two addresses, swapped. None of these locks
// is ever initialized or destroyed by a call the shim sees.
//
//   deadlock_churn_prog churn   std::mutex members of heap objects,
//                               pthread mutexes and rwlocks in malloc'd
//                               memory set with a static initializer, and
//                               pthread mutexes on the stack: no cycle
//   deadlock_churn_prog invert  the same, then a real inversion of two
//                               global std::mutex (invert_ab, invert_ba):
//                               one cycle
//
// A watchdog (alarm) ends a hung run.
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <new>

#define NOINLINE __attribute__((noinline, noclone))

namespace {

constexpr int kRounds = 2000;

struct Object {
  std::mutex mu;
  long payload[4];
};

// The first made is locked first: a consistent order, by the program's
// objects, whatever their addresses.
NOINLINE void lock_pair(std::mutex* first, std::mutex* second) {
  first->lock();
  second->lock();
  second->unlock();
  first->unlock();
}

void churn_cxx() {
  for (int i = 0; i < kRounds; ++i) {
    Object* a = new Object();
    Object* b = new Object();
    lock_pair(&a->mu, &b->mu);
    delete a;
    delete b;
  }
}

void churn_malloc() {
  for (int i = 0; i < kRounds; ++i) {
    auto* a = static_cast<pthread_mutex_t*>(malloc(sizeof(pthread_mutex_t)));
    auto* b = static_cast<pthread_mutex_t*>(malloc(sizeof(pthread_mutex_t)));
    if (a == nullptr || b == nullptr) abort();
    *a = PTHREAD_MUTEX_INITIALIZER;
    *b = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(a);
    pthread_mutex_lock(b);
    pthread_mutex_unlock(b);
    pthread_mutex_unlock(a);
    free(a);
    free(b);
  }
}

void churn_rwlock() {
  for (int i = 0; i < kRounds; ++i) {
    auto* a = static_cast<pthread_rwlock_t*>(malloc(sizeof(pthread_rwlock_t)));
    auto* b = static_cast<pthread_rwlock_t*>(malloc(sizeof(pthread_rwlock_t)));
    if (a == nullptr || b == nullptr) abort();
    *a = PTHREAD_RWLOCK_INITIALIZER;
    *b = PTHREAD_RWLOCK_INITIALIZER;
    pthread_rwlock_wrlock(a);
    pthread_rwlock_wrlock(b);
    pthread_rwlock_unlock(b);
    pthread_rwlock_unlock(a);
    free(a);
    free(b);
  }
}

// Two mutexes in one frame: `flip` decides which is made first, so calls
// with 0 and 1 lock the same two addresses in both orders, each call in
// the order of its own locks.
NOINLINE void stack_pair(int flip) {
  pthread_mutex_t ms[2] = {PTHREAD_MUTEX_INITIALIZER,
                           PTHREAD_MUTEX_INITIALIZER};
  pthread_mutex_lock(&ms[flip]);
  pthread_mutex_lock(&ms[1 - flip]);
  pthread_mutex_unlock(&ms[1 - flip]);
  pthread_mutex_unlock(&ms[flip]);
  __asm__ volatile("" : : "r"(ms) : "memory");
}

void churn_stack() {
  for (int i = 0; i < kRounds; ++i) stack_pair(i & 1);
}

std::mutex g_a, g_b;

NOINLINE void invert_ab() {
  g_a.lock();
  g_b.lock();
  g_b.unlock();
  g_a.unlock();
}
NOINLINE void invert_ba() {
  g_b.lock();
  g_a.lock();
  g_a.unlock();
  g_b.unlock();
}

}  // namespace

int main(int argc, char** argv) {
  alarm(60);
  if (argc != 2) {
    fprintf(stderr, "usage: deadlock_churn_prog churn|invert\n");
    return 2;
  }
  churn_cxx();
  churn_malloc();
  churn_rwlock();
  churn_stack();
  if (strcmp(argv[1], "invert") == 0) {
    invert_ab();
    invert_ba();
  } else if (strcmp(argv[1], "churn") != 0) {
    fprintf(stderr, "deadlock_churn_prog: unknown mode %s\n", argv[1]);
    return 2;
  }
  puts("done");
  return 0;
}
