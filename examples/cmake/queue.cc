// A bounded queue between producer and consumer threads on parklot::Mutex
// and parklot::CondVar, through std::unique_lock and std::scoped_lock.
// Prints the total consumed and exits 0 if it is the total produced.
#include <parklot/condvar.h>
#include <parklot/mutex.h>

#include <cstdint>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace {

constexpr int kProducers = 4;
constexpr int kConsumers = 4;
constexpr int64_t kItemsPerProducer = 20000;
constexpr size_t kCapacity = 16;

parklot::Mutex mu;
parklot::CondVar not_full, not_empty;
std::deque<int64_t> queue;
int producers_left = kProducers;

parklot::Mutex total_mu;
int64_t total = 0;

void Produce(int64_t first) {
  for (int64_t i = first; i < first + kItemsPerProducer; ++i) {
    std::unique_lock<parklot::Mutex> lock(mu);
    not_full.wait(lock, [] { return queue.size() < kCapacity; });
    queue.push_back(i);
    not_empty.notify_one();
  }
  std::scoped_lock lock(mu);
  if (--producers_left == 0) not_empty.notify_all();
}

void Consume() {
  int64_t sum = 0;
  for (;;) {
    std::unique_lock<parklot::Mutex> lock(mu);
    not_empty.wait(lock, [] { return !queue.empty() || producers_left == 0; });
    if (queue.empty()) break;
    sum += queue.front();
    queue.pop_front();
    not_full.notify_one();
  }
  std::scoped_lock lock(total_mu);
  total += sum;
}

}  // namespace

int main() {
  std::vector<std::thread> threads;
  for (int p = 0; p < kProducers; ++p) threads.emplace_back(Produce, p * kItemsPerProducer);
  for (int c = 0; c < kConsumers; ++c) threads.emplace_back(Consume);
  for (auto& t : threads) t.join();
  const int64_t n = kProducers * kItemsPerProducer;
  const int64_t expected = n * (n - 1) / 2;
  std::printf("consumed %lld of %lld\n", static_cast<long long>(total),
              static_cast<long long>(expected));
  return total == expected ? 0 : 1;
}
