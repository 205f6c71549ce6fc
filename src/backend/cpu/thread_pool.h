#pragma once
// ThreadPool: a persistent set of worker threads for the CPU fast paths (matmul_fast.h).
//
// Threads are created once, in the constructor; parallel_for() hands them a job and the
// calling thread takes part as thread index 0. Workers spin briefly after each job (the next
// op of a decode step usually follows within microseconds) and then block on a condition
// variable, so an idle pool does not burn CPU.
//
// Partition (deterministic): parallel_for(n_tasks, fn) with size() == p gives thread i the
// task range [i * c, min(n_tasks, (i + 1) * c)), c = ceil(n_tasks / p). Task 0 always goes to
// thread 0, and for a given (n_tasks, p) task i always goes to the same thread. fn is called
// only for non-empty ranges.
//
// parallel_for_dynamic(n_tasks, grain, fn) instead hands out ranges of `grain` tasks from a
// shared counter, first come first served: which thread runs a task is not fixed, so use it
// only where the result does not depend on that (matmul rows). It keeps both threads busy
// when one runs slower (a shared core, another process), where the static split waits.
//
// Serial fallback (opt-in, the inference backend's pool): when the caller, done with its own
// range, waits for the workers more than 4 x its own time + 0.5 ms in 8 jobs out of 32, a
// worker is being descheduled (an oversubscribed machine: another process on its core), and
// each job would wait for it for up to a scheduler time slice. The pool then runs every job
// on the caller alone, as a 1-thread pool, for 500 ms (thread_pool.cpp), and tries its workers
// again after that. Results do not change where the caller's results do not depend on the
// partition (the backend's ops: thread invariance), but the static partition above no longer
// holds while it lasts, so pools whose callers need it leave the fallback off. With one of two
// cores shared by a busy loop, 2 threads gave SmolLM2 decode 75 t/s and 1 thread 208; with the
// fallback 2 threads give 173 to 188 (1B-shape Q4_0: 16 before, 30 to 31 after, 1 thread 33).

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace llmctl::cpu {

class ThreadPool {
 public:
  // n_threads >= 1 (throws Error otherwise); 1 runs every job inline on the caller.
  // serial_fallback: see above.
  explicit ThreadPool(int n_threads, bool serial_fallback = false);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  // Whether jobs run on the caller alone just now (serial fallback; caller thread only; false,
  // without reading the clock, for a pool without the fallback).
  bool serial_now() const;

  // Calls fn(begin, end, thread_index) for each thread's non-empty range of [0, n_tasks) and
  // returns when all calls have returned. An exception thrown by fn is rethrown here (the
  // first one; the other threads finish their ranges). Not reentrant: fn must not call
  // parallel_for on the same pool, and one caller thread at a time.
  template <class F>
  void parallel_for(int64_t n_tasks, F&& fn) {
    if (n_tasks <= 0) return;
    if (n_threads_ == 1 || serial_now()) {
      fn(int64_t{0}, n_tasks, 0);
      return;
    }
    using Fn = std::remove_reference_t<F>;
    run(n_tasks, const_cast<void*>(static_cast<const void*>(&fn)),
        [](void* ctx, int64_t b, int64_t e, int t) { (*static_cast<Fn*>(ctx))(b, e, t); });
  }

  // Calls fn(begin, end, thread_index) for ranges of at most `grain` (>= 1) tasks that cover
  // [0, n_tasks) once, handed to whichever thread asks first. Same rules as parallel_for.
  template <class F>
  void parallel_for_dynamic(int64_t n_tasks, int64_t grain, F&& fn) {
    if (n_tasks <= 0) return;
    grain = std::max<int64_t>(grain, 1);
    if (n_threads_ == 1 || n_tasks <= grain) {
      for (int64_t b = 0; b < n_tasks; b += grain) fn(b, std::min(n_tasks, b + grain), 0);
      return;
    }
    std::atomic<int64_t> next{0};
    const int64_t n_ranges = (n_tasks + grain - 1) / grain;
    parallel_for(n_threads_, [&](int64_t, int64_t, int t) {
      for (int64_t i = next.fetch_add(1, std::memory_order_relaxed); i < n_ranges;
           i = next.fetch_add(1, std::memory_order_relaxed))
        fn(i * grain, std::min(n_tasks, (i + 1) * grain), t);
    });
  }

  // Thread i's range of [0, n_tasks) (see the partition above); begin == end when empty.
  static void task_range(int64_t n_tasks, int n_threads, int i, int64_t* begin, int64_t* end);

 private:
  using Call = void (*)(void* ctx, int64_t begin, int64_t end, int thread_index);

  void run(int64_t n_tasks, void* ctx, Call call);
  // Serial fallback bookkeeping after a job: the caller's own time and its wait for workers.
  void note_wait(std::chrono::steady_clock::duration own, std::chrono::steady_clock::duration wait);
  void run_range(int thread_index);
  void worker_main(int thread_index);

  int n_threads_;
  std::vector<std::thread> workers_;  // thread indices 1 .. n_threads_ - 1

  // Serial fallback state, the caller's alone (one caller thread at a time): late jobs among
  // the recent ones, and until when jobs run serially.
  bool fallback_;
  int late_jobs_ = 0, jobs_seen_ = 0;
  std::chrono::steady_clock::time_point serial_until_{};

  // The current job, published by incrementing generation_ (release) and read by workers
  // after they observe the new generation (acquire).
  int64_t job_tasks_ = 0;
  void* job_ctx_ = nullptr;
  Call job_call_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> n_done_{0};  // workers finished with the current generation
  std::atomic<int> n_sleeping_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace llmctl::cpu
