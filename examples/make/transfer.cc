// Threads move money between accounts, each guarded by a parklot::Mutex:
// std::scoped_lock takes both accounts' locks without deadlock, whatever
// the order. The main thread waits on a parklot::CondVar (through
// std::unique_lock) for the workers to finish. Exits 0 if no money was
// created or lost.
#include <parklot/condvar.h>
#include <parklot/mutex.h>

#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

namespace {

constexpr int kAccounts = 8;
constexpr int kThreads = 6;
constexpr int kTransfers = 20000;
constexpr long kInitial = 1000;

struct Account {
  parklot::Mutex mu;
  long balance = kInitial;
};
Account accounts[kAccounts];

parklot::Mutex done_mu;
parklot::CondVar all_done;
int running = kThreads;

void Work(unsigned seed) {
  for (int i = 0; i < kTransfers; ++i) {
    seed = seed * 1103515245 + 12345;
    const int from = (seed >> 8) % kAccounts;
    const int to = (seed >> 16) % kAccounts;
    if (from == to) continue;
    std::scoped_lock lock(accounts[from].mu, accounts[to].mu);
    const long amount = accounts[from].balance / 4;
    accounts[from].balance -= amount;
    accounts[to].balance += amount;
  }
  std::scoped_lock lock(done_mu);
  if (--running == 0) all_done.notify_all();
}

}  // namespace

int main() {
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(Work, 7u * t + 1);
  {
    std::unique_lock<parklot::Mutex> lock(done_mu);
    all_done.wait(lock, [] { return running == 0; });
  }
  for (auto& t : threads) t.join();
  long sum = 0;
  for (auto& a : accounts) {
    std::scoped_lock lock(a.mu);
    sum += a.balance;
  }
  std::printf("total %ld of %ld\n", sum, kInitial * kAccounts);
  return sum == kInitial * kAccounts ? 0 : 1;
}
