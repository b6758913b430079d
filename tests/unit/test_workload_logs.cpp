// WorkloadLogStream: a push-style producer turned into a pull stream (order, back-pressure,
// cancellation, errors). No server.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "tfk8s/error.hpp"
#include "tfk8s/workload.hpp"

using namespace tfk8s;
using std::chrono::milliseconds;

TEST_SUITE("workload_logs") {
  TEST_CASE("lines arrive in order with their source, the end is reported") {
    WorkloadLogStream s([](const WorkloadLogStream::Emit& emit, const auto&) {
      for (int i = 0; i < 5; ++i) emit({"worker-" + std::to_string(i % 2), std::to_string(i)});
    });
    for (int i = 0; i < 5; ++i) {
      auto l = s.Next(milliseconds(2000));
      REQUIRE(l);
      CHECK(l->source == "worker-" + std::to_string(i % 2));
      CHECK(l->line == std::to_string(i));
    }
    CHECK_FALSE(s.Next(milliseconds(2000)));
    CHECK(s.ended());
    CHECK(WorkloadLogLine{"ps-0", "ready"}.Prefixed() == "[ps-0] ready");
  }

  TEST_CASE("a full queue pauses the producer instead of growing") {
    std::atomic<int> produced{0};
    WorkloadLogStream s(
        [&](const WorkloadLogStream::Emit& emit, const auto&) {
          for (int i = 0; i < 100; ++i) {
            if (!emit({"p", std::to_string(i)})) return;
            ++produced;
          }
        },
        /*capacity=*/4);
    std::this_thread::sleep_for(milliseconds(200));
    CHECK(produced.load() <= 5);  // four queued, one waiting to be queued
    int read = 0;
    while (auto l = s.Next(milliseconds(2000))) {
      CHECK(l->line == std::to_string(read));
      ++read;
    }
    CHECK(read == 100);
  }

  TEST_CASE("Cancel and destruction stop a producer that waits for lines") {
    std::atomic<bool> stopped{false};
    auto producer = [&](const WorkloadLogStream::Emit&, const std::function<bool()>& cancelled) {
      while (!cancelled()) std::this_thread::sleep_for(milliseconds(10));
      stopped = true;
    };
    {
      WorkloadLogStream s(producer);
      CHECK_FALSE(s.Next(milliseconds(50)));  // nothing yet, not ended
      CHECK_FALSE(s.ended());
      s.Cancel();
      CHECK(s.ended());
      CHECK_FALSE(s.Next(milliseconds(50)));
    }  // joins
    CHECK(stopped.load());
    stopped = false;
    { WorkloadLogStream s(producer); }  // destroyed unread: cancels and joins
    CHECK(stopped.load());
  }

  TEST_CASE("the producer's error is thrown once, after the lines it emitted") {
    WorkloadLogStream s([](const WorkloadLogStream::Emit& emit, const auto&) {
      emit({"attempt-1", "started"});
      throw NotFound(ErrorKind::kNotFound, "run team-a/r-1 was deleted", 404, "NotFound");
    });
    auto l = s.Next(milliseconds(2000));
    REQUIRE(l);
    CHECK(l->line == "started");
    CHECK_THROWS_AS(s.Next(milliseconds(2000)), NotFound);
    CHECK_FALSE(s.Next(milliseconds(100)));
    CHECK(s.ended());
  }

  TEST_CASE("a moved stream keeps reading, the moved-from one owns nothing") {
    WorkloadLogStream a([](const WorkloadLogStream::Emit& emit, const auto&) {
      emit({"s", "one"});
    });
    WorkloadLogStream b(std::move(a));
    auto l = b.Next(milliseconds(2000));
    REQUIRE(l);
    CHECK(l->line == "one");
  }
}
