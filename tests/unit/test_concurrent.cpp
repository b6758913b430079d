// internal::ForEachConcurrently: every index once, calls overlap, errors surface after all ran.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "util/concurrent.hpp"

using tfk8s::internal::ForEachConcurrently;

TEST_SUITE("concurrent") {
  TEST_CASE("every index runs exactly once, n == 0 runs nothing") {
    std::vector<std::atomic<int>> hits(100);
    ForEachConcurrently(
        hits.size(), [&](std::size_t i) { ++hits[i]; }, 7);
    for (const auto& h : hits) CHECK(h == 1);
    bool called = false;
    ForEachConcurrently(0, [&](std::size_t) { called = true; });
    CHECK_FALSE(called);
  }

  TEST_CASE("calls overlap: four calls that each wait for all four to have started") {
    // With serial execution the first call would wait forever; the bounded wait turns that
    // into a failed check instead of a hang.
    std::mutex mu;
    std::condition_variable cv;
    int started = 0;
    std::atomic<int> met{0};
    ForEachConcurrently(
        4,
        [&](std::size_t) {
          std::unique_lock lock(mu);
          ++started;
          cv.notify_all();
          if (cv.wait_for(lock, std::chrono::seconds(10), [&] { return started == 4; })) ++met;
        },
        4);
    CHECK(met == 4);
  }

  TEST_CASE("max_threads bounds the calls in flight") {
    std::atomic<int> in_flight{0};
    std::atomic<int> peak{0};
    ForEachConcurrently(
        40,
        [&](std::size_t) {
          int now = ++in_flight;
          int p = peak;
          while (now > p && !peak.compare_exchange_weak(p, now)) {
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          --in_flight;
        },
        3);
    CHECK(peak >= 1);
    CHECK(peak <= 3);
  }

  TEST_CASE("the lowest index's exception is rethrown after every call finished") {
    std::atomic<int> ran{0};
    auto run = [&] {
      ForEachConcurrently(
          10,
          [&](std::size_t i) {
            ++ran;
            if (i == 3) throw std::runtime_error("three");
            if (i == 8) throw std::logic_error("eight");
          },
          4);
    };
    CHECK_THROWS_WITH_AS(run(), "three", std::runtime_error);
    CHECK(ran == 10);
  }
}
