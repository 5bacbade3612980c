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
//   deadlock_churn_prog invert  the same, then two real inversions: of two
//                               std::mutex members of objects made at the
//                               churned addresses (heap_forward,
//                               heap_backward) and of two global std::mutex
//                               (invert_ab, invert_ba): two cycles
//   deadlock_churn_prog stale   a mutex in malloc'd memory stays on its
//                               locker's list of held locks (another thread
//                               unlocked it, as glibc allows a normal
//                               mutex), is freed, and the memory is reused
//                               for other data; the locker then takes two
//                               locks: the data must be left as written
//
// A watchdog (alarm) ends a hung run.
#include <pthread.h>
#include <stdint.h>
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

// Two objects made at the addresses the churn used, locked in both
// orders: a real inversion, whatever the addresses' past.
// (The empty asm keeps each call from becoming a tail jump, which would
// leave the function's frame out of the report's stacks.)
NOINLINE void heap_forward(Object* x, Object* y) {
  lock_pair(&x->mu, &y->mu);
  __asm__ volatile("" ::: "memory");
}
NOINLINE void heap_backward(Object* x, Object* y) {
  lock_pair(&y->mu, &x->mu);
  __asm__ volatile("" ::: "memory");
}

void invert_heap() {
  Object* x = new Object();
  Object* y = new Object();
  heap_forward(x, y);
  heap_backward(x, y);
  delete x;
  delete y;
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

void* unlock_it(void* m) {
  pthread_mutex_unlock(static_cast<pthread_mutex_t*>(m));
  return nullptr;
}

// Returns false if the detector wrote into memory that no longer holds a
// lock (or the allocator did not hand the block back: nothing checked).
bool stale_entry() {
  auto* m = static_cast<pthread_mutex_t*>(malloc(sizeof(pthread_mutex_t)));
  if (m == nullptr) abort();
  *m = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(m);
  pthread_t t;
  if (pthread_create(&t, nullptr, unlock_it, m) != 0) abort();
  pthread_join(t, nullptr);
  // Compared as a number: the compiler may take a fresh block to differ
  // from any pointer.
  uintptr_t was = reinterpret_cast<uintptr_t>(m);
  __asm__ volatile("" : "+r"(was));
  free(m);
  // Through a number too: malloc then memset 0 may become calloc, which
  // takes no block from glibc's per-thread cache.
  uintptr_t now = reinterpret_cast<uintptr_t>(malloc(sizeof(pthread_mutex_t)));
  __asm__ volatile("" : "+r"(now));
  auto* data = reinterpret_cast<unsigned char*>(now);
  if (now != was) {
    fprintf(stderr, "deadlock_churn_prog: the block was not reused\n");
    return false;
  }
  memset(data, 0, sizeof(pthread_mutex_t));  // as calloc leaves it
  lock_pair(&g_a, &g_b);
  bool intact = true;
  for (size_t i = 0; i < sizeof(pthread_mutex_t); ++i) {
    if (data[i] != 0) intact = false;
  }
  if (!intact) {
    fprintf(stderr, "deadlock_churn_prog: freed memory at %p was written\n",
            static_cast<void*>(data));
  }
  free(data);
  return intact;
}

}  // namespace

int main(int argc, char** argv) {
  alarm(60);
  if (argc != 2) {
    fprintf(stderr, "usage: deadlock_churn_prog churn|invert|stale\n");
    return 2;
  }
  if (strcmp(argv[1], "stale") == 0) {
    if (!stale_entry()) return 1;
    puts("done");
    return 0;
  }
  churn_cxx();
  churn_malloc();
  churn_rwlock();
  churn_stack();
  if (strcmp(argv[1], "invert") == 0) {
    invert_heap();
    invert_ab();
    invert_ba();
  } else if (strcmp(argv[1], "churn") != 0) {
    fprintf(stderr, "deadlock_churn_prog: unknown mode %s\n", argv[1]);
    return 2;
  }
  puts("done");
  return 0;
}
