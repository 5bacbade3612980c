/* Memory freed right after the last unlock or the last wake-up (docs/design.md
 * section 6, invariant 2): once another thread may acquire, destroy and free a
 * lock, the unlocking (or notifying) thread must not touch its memory.
 *
 * Heap objects hold a mutex and a condvar. Three patterns, in loops across
 * worker threads:
 *  - refcount: N holders each lock, drop a reference, unlock; the one that
 *    dropped the last reference destroys and frees the object at once;
 *  - completion: waiters sleep on the condvar until `done`; a completer
 *    locks, sets `done`, signals or broadcasts, unlocks and never touches
 *    the object again; the last waiter to leave destroys and frees it;
 *  - handoff: a holder keeps the mutex while others queue on it, so each
 *    unlock hands over to a parked thread; the last one frees it.
 * Freed objects are either munmap'ed (any later touch faults) or poisoned
 * with memset and kept in a per-thread quarantine, where a later check
 * finds any byte written after the free.
 *
 *   free_after_unlock_prog [OBJECTS]   (default 30000) */
#include "tests/preload/shim_test_util.h"

#include <sys/mman.h>

/* Workers 0..kWaiters-1 run the jobs that wait on a completion; the others
 * run the completions and the holds, and never wait on another job, so no
 * job waits on one queued behind a waiting job. Reference drops go to any. */
enum { kWorkers = 8, kWaiters = 4, kQuarantine = 64, kPoison = 0xA5 };

struct object {
  pthread_mutex_t m;
  pthread_cond_t c;
  int refs;      /* holders (refcount, handoff) or waiters (completion) */
  int done;
  int mapped;    /* 1: its own mapping, munmap'ed when freed */
  long id;
  char pad[64];
};

/* ---- allocation, poisoning, quarantine ------------------------------------ */

static struct object* object_new(long id, int refs, int mutex_kind) {
  struct object* o;
  const int mapped = (id % 3) == 0;
  if (mapped) {
    void* p = mmap(NULL, sizeof(*o), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) FATAL("mmap: %s", strerror(errno));
    o = (struct object*)p;
  } else {
    o = (struct object*)malloc(sizeof(*o));
    if (o == NULL) FATAL("malloc failed");
  }
  memset(o, 0, sizeof(*o));
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_settype(&a, mutex_kind);
  CHECK_RC(pthread_mutex_init(&o->m, &a), 0);
  pthread_mutexattr_destroy(&a);
  CHECK_RC(pthread_cond_init(&o->c, NULL), 0);
  o->refs = refs;
  o->mapped = mapped;
  o->id = id;
  return o;
}

struct quarantine {
  unsigned char* slots[kQuarantine];
  int next;
};
static __thread struct quarantine t_quarantine;
static long g_checked;

static void check_poison(unsigned char* p) {
  for (size_t i = 0; i < sizeof(struct object); ++i) {
    if (p[i] != kPoison) {
      SHIM_FAIL("freed object %p: byte %zu is %#x, written after the free", (void*)p, i, p[i]);
      return;
    }
  }
  __atomic_fetch_add(&g_checked, 1, __ATOMIC_RELAXED);
}

/* Called right after the last unlock / last wake-up. */
static void object_free(struct object* o) {
  CHECK_RC(pthread_cond_destroy(&o->c), 0);
  CHECK_RC(pthread_mutex_destroy(&o->m), 0);
  if (o->mapped) {
    munmap(o, sizeof(*o));
    return;
  }
  memset(o, kPoison, sizeof(*o));
  struct quarantine* q = &t_quarantine;
  unsigned char* old = q->slots[q->next];
  if (old != NULL) {
    check_poison(old);
    free(old);
  }
  q->slots[q->next] = (unsigned char*)o;
  q->next = (q->next + 1) % kQuarantine;
}

static void quarantine_drain(void) {
  struct quarantine* q = &t_quarantine;
  for (int i = 0; i < kQuarantine; ++i) {
    if (q->slots[i] != NULL) {
      check_poison(q->slots[i]);
      free(q->slots[i]);
      q->slots[i] = NULL;
    }
  }
}

/* ---- work queues (one per worker) ---------------------------------------- */

enum job_kind { kRefDrop, kWaitDone, kComplete, kHandoffHold, kHandoffTake, kStop };

struct job {
  enum job_kind kind;
  struct object* o;
  int broadcast;
};

enum { kQueueCap = 256 };
struct queue {
  pthread_mutex_t m;
  pthread_cond_t not_empty, not_full;
  struct job jobs[kQueueCap];
  int head, len;
};

static struct queue g_queues[kWorkers];
static long g_freed;

static void push(int worker, struct job j) {
  struct queue* q = &g_queues[worker];
  CHECK_RC(pthread_mutex_lock(&q->m), 0);
  while (q->len == kQueueCap) CHECK_RC(pthread_cond_wait(&q->not_full, &q->m), 0);
  q->jobs[(q->head + q->len++) % kQueueCap] = j;
  CHECK_RC(pthread_cond_signal(&q->not_empty), 0);
  CHECK_RC(pthread_mutex_unlock(&q->m), 0);
}

static struct job pop(int worker) {
  struct queue* q = &g_queues[worker];
  CHECK_RC(pthread_mutex_lock(&q->m), 0);
  while (q->len == 0) CHECK_RC(pthread_cond_wait(&q->not_empty, &q->m), 0);
  struct job j = q->jobs[q->head];
  q->head = (q->head + 1) % kQueueCap;
  --q->len;
  CHECK_RC(pthread_cond_signal(&q->not_full), 0);
  CHECK_RC(pthread_mutex_unlock(&q->m), 0);
  return j;
}

/* Drops one reference under the lock; frees on the last. */
static void drop_ref(struct object* o) {
  CHECK_RC(pthread_mutex_lock(&o->m), 0);
  const int last = --o->refs == 0;
  CHECK_RC(pthread_mutex_unlock(&o->m), 0);
  /* From here on only the thread that saw the count reach zero may touch
   * the object, and it frees it at once. */
  if (last) {
    object_free(o);
    __atomic_fetch_add(&g_freed, 1, __ATOMIC_RELAXED);
  }
}

static void* worker(void* arg) {
  const int me = (int)(intptr_t)arg;
  for (;;) {
    struct job j = pop(me);
    struct object* o = j.o;
    switch (j.kind) {
      case kStop:
        quarantine_drain();
        return NULL;
      case kRefDrop:
        drop_ref(o);
        break;
      case kWaitDone: {
        CHECK_RC(pthread_mutex_lock(&o->m), 0);
        while (!o->done) {
          struct timespec dl = shim_deadline_ms(CLOCK_REALTIME, 60000);
          const int rc = pthread_cond_timedwait(&o->c, &o->m, &dl);
          if (rc != 0) FATAL("completion wait returned %d (%s)", rc, shim_errname(rc));
        }
        /* Pass a signal on to the next waiter (a completer that signals
         * wakes one), under the lock, before our reference goes. */
        CHECK_RC(pthread_cond_signal(&o->c), 0);
        const int last = --o->refs == 0;
        CHECK_RC(pthread_mutex_unlock(&o->m), 0);
        if (last) {
          object_free(o);
          __atomic_fetch_add(&g_freed, 1, __ATOMIC_RELAXED);
        }
        break;
      }
      case kComplete:
        CHECK_RC(pthread_mutex_lock(&o->m), 0);
        o->done = 1;
        CHECK_RC(j.broadcast ? pthread_cond_broadcast(&o->c) : pthread_cond_signal(&o->c), 0);
        CHECK_RC(pthread_mutex_unlock(&o->m), 0);
        break;  /* never touches `o` again */
      case kHandoffHold:
        /* Hold the lock a while so the other holders park on it, then
         * drop our reference like them. */
        CHECK_RC(pthread_mutex_lock(&o->m), 0);
        o->done = 1;
        shim_sleep_us(200);
        {
          const int last = --o->refs == 0;
          CHECK_RC(pthread_mutex_unlock(&o->m), 0);
          if (last) {
            object_free(o);
            __atomic_fetch_add(&g_freed, 1, __ATOMIC_RELAXED);
          }
        }
        break;
      case kHandoffTake:
        drop_ref(o);
        break;
    }
  }
}

int main(int argc, char** argv) {
  shim_test_start("free_after_unlock", 100);
  const long objects = argc > 1 ? atol(argv[1]) : 30000;
  for (int i = 0; i < kWorkers; ++i) {
    CHECK_RC(pthread_mutex_init(&g_queues[i].m, NULL), 0);
    CHECK_RC(pthread_cond_init(&g_queues[i].not_empty, NULL), 0);
    CHECK_RC(pthread_cond_init(&g_queues[i].not_full, NULL), 0);
  }
  pthread_t t[kWorkers];
  for (int i = 0; i < kWorkers; ++i) t[i] = shim_spawn(worker, (void*)(intptr_t)i);

  static const int kinds[] = {PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_ERRORCHECK,
                              PTHREAD_MUTEX_RECURSIVE, PTHREAD_MUTEX_ADAPTIVE_NP};
  uint32_t rng = 0xF00Du;
  for (long id = 0; id < objects; ++id) {
    const int kind = kinds[id % 4];
    const int first = (int)(shim_rand(&rng) % kWorkers);
    const int other = kWaiters + (int)(shim_rand(&rng) % (kWorkers - kWaiters));
    switch (id % 3) {
      case 0: {  /* refcount: 2..kWorkers holders */
        const int n = 2 + (int)(shim_rand(&rng) % (kWorkers - 1));
        struct object* o = object_new(id, n, kind);
        for (int k = 0; k < n; ++k) {
          struct job j = {kRefDrop, o, 0};
          push((first + k) % kWorkers, j);
        }
        break;
      }
      case 1: {  /* completion: 1..kWaiters waiters and one completer */
        const int n = 1 + (int)(shim_rand(&rng) % kWaiters);
        struct object* o = object_new(id, n, kind);
        const int completer_at = (int)(shim_rand(&rng) % (n + 1));
        for (int k = 0, w = 0; k <= n; ++k) {
          struct job j = {kWaitDone, o, (int)(id & 4) != 0};
          if (k == completer_at) {
            j.kind = kComplete;
            push(other, j);
          } else {
            push((first + w++) % kWaiters, j);
          }
        }
        break;
      }
      default: {  /* handoff: a holder and 1..kWorkers-1 takers */
        const int n = 2 + (int)(shim_rand(&rng) % (kWorkers - 1));
        struct object* o = object_new(id, n, kind);
        struct job h = {kHandoffHold, o, 0};
        push(other, h);
        for (int k = 1; k < n; ++k) {
          struct job j = {kHandoffTake, o, 0};
          push((first + k) % kWorkers, j);
        }
        break;
      }
    }
  }
  for (int i = 0; i < kWorkers; ++i) {
    struct job j = {kStop, NULL, 0};
    push(i, j);
  }
  for (int i = 0; i < kWorkers; ++i) pthread_join(t[i], NULL);
  if (g_freed != objects) SHIM_FAIL("%ld objects freed, want %ld", g_freed, objects);
  printf("free_after_unlock: %ld objects freed right after the last unlock or "
         "wake-up; %ld poisoned copies checked untouched\n", g_freed, g_checked);
  return shim_test_finish();
}
