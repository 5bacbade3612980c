#include "runtime/fork.h"

#include <pthread.h>

#include <atomic>
#include <cstddef>

namespace parklot::internal {
namespace {

constexpr size_t kSteps = static_cast<size_t>(ForkStep::kCount);

std::atomic<const ForkHandlers*> g_steps[kSteps];
// Which steps' parent/child parts this fork runs. Written by the forking
// thread only: glibc holds its atfork lock from the prepare handlers to the
// parent/child ones, so forks do not overlap here.
bool g_taken[kSteps];

const ForkHandlers* Step(size_t i) {
  return g_steps[i].load(std::memory_order_acquire);
}

void Prepare() {
  for (size_t i = 0; i < kSteps; ++i) {
    const ForkHandlers* h = Step(i);
    g_taken[i] = h != nullptr && (h->prepare == nullptr || h->prepare());
  }
}

void Parent() {
  for (size_t i = kSteps; i-- > 0;) {
    if (!g_taken[i]) continue;
    g_taken[i] = false;
    if (void (*parent)() = Step(i)->parent) parent();
  }
}

void Child() {
  for (size_t i = kSteps; i-- > 0;) {
    if (!g_taken[i]) continue;
    g_taken[i] = false;
    if (void (*child)() = Step(i)->child) child();
  }
}

__attribute__((constructor)) void RegisterAtFork() {
  pthread_atfork(Prepare, Parent, Child);
}

}  // namespace

void RegisterForkStep(ForkStep step, const ForkHandlers* handlers) {
  g_steps[static_cast<size_t>(step)].store(handlers, std::memory_order_release);
}

}  // namespace parklot::internal
