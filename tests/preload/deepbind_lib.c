/* A library the test loads with RTLD_DEEPBIND: its pthread calls bind in
 * its own scope first, where glibc's definitions are. */
#include <pthread.h>

void deepbind_lock(pthread_mutex_t* m) { pthread_mutex_lock(m); }
void deepbind_unlock(pthread_mutex_t* m) { pthread_mutex_unlock(m); }
int deepbind_cond_wait(pthread_cond_t* c, pthread_mutex_t* m) {
  return pthread_cond_wait(c, m);
}
int deepbind_cond_signal(pthread_cond_t* c) { return pthread_cond_signal(c); }
