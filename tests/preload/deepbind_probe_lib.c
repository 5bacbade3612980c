/* A library the deepbind tests load with RTLD_DEEPBIND: it shows how its
 * references to the shim's functions are bound. deepbind_probe_table holds
 * their addresses (data relocations in RELRO), deepbind_probe_lock_ptr a
 * pointer the library's constructor replaces with its own wrapper, and
 * deepbind_probe_lock_ptr2 one the program may replace. */
#include <pthread.h>
#include <semaphore.h>
#include <stddef.h>

#define PROBE(f) {#f, (void*)f}
const struct {
  const char* name;
  void* fn;
} deepbind_probe_table[] = {
    PROBE(pthread_mutex_lock),     PROBE(pthread_mutex_unlock),
    PROBE(pthread_mutex_trylock),  PROBE(pthread_mutex_init),
    PROBE(pthread_mutex_destroy),  PROBE(pthread_mutex_timedlock),
    PROBE(pthread_cond_wait),      PROBE(pthread_cond_signal),
    PROBE(pthread_cond_broadcast), PROBE(pthread_cond_timedwait),
    PROBE(pthread_cond_init),      PROBE(pthread_cond_destroy),
    PROBE(pthread_rwlock_rdlock),  PROBE(pthread_rwlock_wrlock),
    PROBE(pthread_rwlock_unlock),  PROBE(pthread_rwlock_init),
    PROBE(pthread_barrier_wait),   PROBE(pthread_once),
    PROBE(sem_wait),               PROBE(sem_post),
    PROBE(sem_init),               PROBE(sem_destroy),
    {NULL, NULL},
};

int (*deepbind_probe_lock_ptr)(pthread_mutex_t*) = pthread_mutex_lock;
int (*deepbind_probe_lock_ptr2)(pthread_mutex_t*) = pthread_mutex_lock;

static int wrapper(pthread_mutex_t* m) { return pthread_mutex_lock(m); }
void* deepbind_probe_wrapper(void) { return (void*)wrapper; }

/* A call through the PLT. */
int deepbind_probe_call_lock(pthread_mutex_t* m) { return pthread_mutex_lock(m); }
int deepbind_probe_call_unlock(pthread_mutex_t* m) {
  return pthread_mutex_unlock(m);
}

__attribute__((constructor)) static void init(void) {
  deepbind_probe_lock_ptr = wrapper;
}
