// ThreadPool (src/backend/cpu/thread_pool.h): the static partition parallel_for documents, the
// dynamic ranges of parallel_for_dynamic (every task once, none longer than the grain),
// exceptions reaching the caller, and the opt-in serial fallback (late workers: every task on
// the caller; off by default, where the partition holds whatever the workers' delays).
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backend/cpu/thread_pool.h"
#include "core/error.h"

using namespace llmctl;
using namespace llmctl::cpu;

TEST_CASE("thread pool: every task once, static partition, caller is thread 0", "[cpu]") {
  for (int n_threads : {1, 2, 3, 4}) {
    ThreadPool pool(n_threads);
    REQUIRE(pool.size() == n_threads);
    for (int64_t n_tasks : {0, 1, 2, 3, 7, 64, 1000}) {
      for (int rep = 0; rep < 50; ++rep) {
        std::vector<std::atomic<int>> owner(static_cast<size_t>(n_tasks) + 1);
        for (auto& o : owner) o = -1;
        pool.parallel_for(n_tasks, [&](int64_t b, int64_t e, int t) {
          for (int64_t i = b; i < e; ++i) owner[static_cast<size_t>(i)] = t;
        });
        for (int64_t i = 0; i < n_tasks; ++i) {
          int expect = -1;
          for (int t = 0; t < n_threads; ++t) {
            int64_t b = 0, e = 0;
            ThreadPool::task_range(n_tasks, n_threads, t, &b, &e);
            if (i >= b && i < e) expect = t;
          }
          REQUIRE(owner[static_cast<size_t>(i)] == expect);
          REQUIRE(expect >= 0);
        }
      }
    }
  }
}

TEST_CASE("thread pool: dynamic ranges cover every task once, at most grain long", "[cpu]") {
  for (int n_threads : {1, 2, 3}) {
    ThreadPool pool(n_threads);
    for (int64_t n_tasks : {0, 1, 5, 64, 1001}) {
      for (int64_t grain : {1, 3, 4, 2000}) {
        std::vector<std::atomic<int>> count(static_cast<size_t>(n_tasks) + 1);
        std::atomic<bool> bad_range{false};
        pool.parallel_for_dynamic(n_tasks, grain, [&](int64_t b, int64_t e, int t) {
          if (e - b < 1 || e - b > grain || t < 0 || t >= n_threads) bad_range = true;
          for (int64_t i = b; i < e; ++i) ++count[static_cast<size_t>(i)];
        });
        INFO("threads " << n_threads << " tasks " << n_tasks << " grain " << grain);
        CHECK_FALSE(bad_range);
        for (int64_t i = 0; i < n_tasks; ++i) REQUIRE(count[static_cast<size_t>(i)] == 1);
        CHECK(count[static_cast<size_t>(n_tasks)] == 0);
      }
    }
    CHECK_THROWS_AS(pool.parallel_for_dynamic(100, 7,
                                              [](int64_t b, int64_t, int) {
                                                if (b == 49) throw std::runtime_error("49");
                                              }),
                    std::runtime_error);
  }
}

TEST_CASE("thread pool: many short jobs, exceptions reach the caller, bad size", "[cpu]") {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int rep = 0; rep < 5000; ++rep)
    pool.parallel_for(3, [&](int64_t b, int64_t e, int) { sum += e - b; });
  CHECK(sum == 15000);
  CHECK_THROWS_AS(pool.parallel_for(3,
                                    [](int64_t b, int64_t, int) {
                                      if (b == 2) throw std::runtime_error("task 2");
                                    }),
                  std::runtime_error);
  pool.parallel_for(3, [&](int64_t b, int64_t e, int) { sum += e - b; });  // still usable
  CHECK(sum == 15003);
  CHECK_THROWS_AS(ThreadPool(0), Error);
}

namespace {

// A job whose workers (thread index > 0) are 30 ms late, as a descheduled worker would be (long
// enough that the caller, whose range is empty, is never that slow itself on a loaded machine).
void late_job(ThreadPool& pool) {
  pool.parallel_for(2, [](int64_t, int64_t, int t) {
    if (t > 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
  });
}

// Which thread ran each of 64 tasks.
std::vector<int> owners(ThreadPool& pool) {
  std::vector<std::atomic<int>> owner(64);
  pool.parallel_for(64, [&](int64_t b, int64_t e, int t) {
    for (int64_t i = b; i < e; ++i) owner[static_cast<size_t>(i)] = t;
  });
  std::vector<int> out;
  for (auto& o : owner) out.push_back(o.load());
  return out;
}

}  // namespace

TEST_CASE("thread pool: late workers turn the serial fallback on, only where asked for", "[cpu]") {
  ThreadPool with(2, /*serial_fallback=*/true), without(2);
  CHECK_FALSE(with.serial_now());
  for (int i = 0; i < 7; ++i) late_job(with);
  CHECK_FALSE(with.serial_now());  // 7 late jobs of 32: not yet
  late_job(with);
  REQUIRE(with.serial_now());
  for (int o : owners(with)) CHECK(o == 0);  // every task on the caller
  std::atomic<int64_t> sum{0};
  with.parallel_for_dynamic(100, 7, [&](int64_t b, int64_t e, int t) {
    CHECK(t == 0);
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  CHECK(sum == 4950);

  for (int i = 0; i < 9; ++i) late_job(without);
  CHECK_FALSE(without.serial_now());
  const std::vector<int> o = owners(without);  // the static partition: 0..31 and 32..63
  for (size_t i = 0; i < o.size(); ++i) CHECK(o[i] == (i < 32 ? 0 : 1));
}
