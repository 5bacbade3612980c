// A program that links libparklot.so and makes the library's copy of the
// lot read its configuration (a timed lock that waits): under the shim the
// process holds two copies of the lot, which must warn of a bad knob once
// between them (knob_words_test.sh).
#include <parklot/mutex.h>

#include <thread>

int main() {
  parklot::Mutex mu;
  mu.Lock();
  std::thread t([&] {
    if (mu.LockUntil(parklot::Deadline::InNanos(1000000))) mu.Unlock();
  });
  t.join();
  mu.Unlock();
  return 0;
}
