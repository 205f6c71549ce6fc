// ThreadPool (thread_pool.h): a generation counter publishes each job; workers spin on it for
// a short while, then sleep on a condition variable.
#include "backend/cpu/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"

namespace llmctl::cpu {

namespace {

// How long an idle worker (and the caller waiting for workers) polls before blocking. Long
// enough to bridge the small ops between two matmuls of a decode step, short enough that an
// idle pool sleeps almost at once on a human time scale.
constexpr auto kSpinTime = std::chrono::microseconds(200);
// Polls with the pause instruction first (a round trip between two running threads takes
// well under a microsecond), then with yield: when there are more runnable threads than
// cores, the thread we wait for may be queued behind us on our own core, and pure spinning
// would hold it off for a whole time slice.
constexpr int kPauseSpins = 32;
// Serial fallback (thread_pool.h): a job is late when the caller waits for its workers longer
// than kLateFactor x its own range plus kLateSlack (a wake-up from sleep takes about 0.1 ms, a
// worker descheduled for another process a time slice, milliseconds); kLateJobs late jobs
// within kLateWindow jobs turn the fallback on for kSerialFallbackTime. An idle 2-core VM has
// a late job about once in 64 (a 1 to 8 ms stall); with one core busy, nearly every job is.
constexpr int kLateFactor = 4, kLateJobs = 8, kLateWindow = 32;
constexpr auto kLateSlack = std::chrono::microseconds(500);
constexpr auto kSerialFallbackTime = std::chrono::milliseconds(500);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Polls until pred() holds or kSpinTime has passed; returns pred().
template <class Pred>
bool spin_until(Pred pred) {
  for (int i = 0; i < kPauseSpins; ++i) {
    if (pred()) return true;
    cpu_relax();
  }
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (int i = 0;; ++i) {
    if (pred()) return true;
    std::this_thread::yield();
    if ((i & 7) == 7 && std::chrono::steady_clock::now() > deadline) return pred();
  }
}

}  // namespace

void ThreadPool::task_range(int64_t n_tasks, int n_threads, int i, int64_t* begin, int64_t* end) {
  const int64_t chunk = (n_tasks + n_threads - 1) / n_threads;
  *begin = std::min(n_tasks, chunk * i);
  *end = std::min(n_tasks, chunk * (i + 1));
}

ThreadPool::ThreadPool(int n_threads, bool serial_fallback)
    : n_threads_(n_threads), fallback_(serial_fallback) {
  if (n_threads < 1)
    throw Error(fmt::format("thread pool: expected at least 1 thread, got {}", n_threads));
  workers_.reserve(static_cast<size_t>(n_threads - 1));
  for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker_main(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_range(int thread_index) {
  int64_t begin = 0, end = 0;
  task_range(job_tasks_, n_threads_, thread_index, &begin, &end);
  if (begin >= end) return;
  try {
    job_call_(job_ctx_, begin, end, thread_index);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::run(int64_t n_tasks, void* ctx, Call call) {
  job_tasks_ = n_tasks;
  job_ctx_ = ctx;
  job_call_ = call;
  n_done_.store(0, std::memory_order_relaxed);
  // seq_cst store then seq_cst load of n_sleeping_: a worker that registers as sleeping after
  // this load is guaranteed to see the new generation in its wait predicate (worker_main).
  generation_.fetch_add(1);
  if (n_sleeping_.load() > 0) {
    std::lock_guard<std::mutex> lock(mutex_);  // a worker between predicate and wait holds it
    wake_.notify_all();
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = fallback_ ? Clock::now() : Clock::time_point{};
  run_range(0);
  const Clock::time_point t1 = fallback_ ? Clock::now() : Clock::time_point{};
  const int n_workers = n_threads_ - 1;
  auto all_done = [&] { return n_done_.load(std::memory_order_acquire) == n_workers; };
  while (!spin_until(all_done)) std::this_thread::yield();
  if (fallback_) note_wait(t1 - t0, Clock::now() - t1);
  if (error_) {
    std::exception_ptr e;
    std::swap(e, error_);
    std::rethrow_exception(e);
  }
}

bool ThreadPool::serial_now() const {
  return fallback_ && std::chrono::steady_clock::now() < serial_until_;
}

void ThreadPool::note_wait(std::chrono::steady_clock::duration own,
                           std::chrono::steady_clock::duration wait) {
  if (wait > kLateFactor * own + kLateSlack) ++late_jobs_;
  if (late_jobs_ >= kLateJobs) {
    serial_until_ = std::chrono::steady_clock::now() + kSerialFallbackTime;
    late_jobs_ = jobs_seen_ = 0;
    return;
  }
  if (++jobs_seen_ >= kLateWindow) late_jobs_ = jobs_seen_ = 0;
}

void ThreadPool::worker_main(int thread_index) {
  uint64_t seen = 0;
  for (;;) {
    auto has_job = [&] {
      return generation_.load(std::memory_order_acquire) != seen ||
             stop_.load(std::memory_order_acquire);
    };
    if (!spin_until(has_job)) {
      std::unique_lock<std::mutex> lock(mutex_);
      n_sleeping_.fetch_add(1);
      wake_.wait(lock, has_job);
      n_sleeping_.fetch_sub(1);
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen = generation_.load(std::memory_order_acquire);
    run_range(thread_index);
    n_done_.fetch_add(1, std::memory_order_release);
  }
}

}  // namespace llmctl::cpu
