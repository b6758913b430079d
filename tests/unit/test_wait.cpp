// The one wait engine every workload's wait runs on (workloads/wait.hpp), against the fake
// cluster's real watches: each new status reported once, the judge's failure thrown after it
// was reported, the deadline's Timeout naming the workload, its goal, the whole duration and
// the last status, and `cancelled` ending the wait.
#include <doctest/doctest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tfk8s/error.hpp"
#include "tfk8s/testing/fake_cluster.hpp"
#include "workloads/kinds.hpp"
#include "workloads/wait.hpp"

using namespace tfk8s;
using std::chrono::milliseconds;

namespace {

Json Counter(const std::string& value) {
  return Json{{"apiVersion", "v1"},
              {"kind", "ConfigMap"},
              {"metadata", {{"name", "counter"}, {"namespace", "default"}}},
              {"data", {{"value", value}}}};
}

// The counter's value as the watch holds it ("" before it exists or before the first list).
std::string ValueOf(const internal::WaitSnapshot& s) {
  if (s.objects.empty() || s.objects[0].empty()) return "";
  return s.objects[0].front()["data"].value("value", "");
}

std::vector<internal::WaitWatch> CounterWatch() {
  ListOptions sel;
  sel.field_selector = "metadata.name=counter";
  return {{&internal::kinds::kConfigMaps, sel}};
}

}  // namespace

TEST_CASE("wait engine: each new status reported once, done when the judge says so") {
  testing::FakeCluster fake;
  fake.Add(Counter("1"));
  std::thread writer([&] {
    // A change that leaves the status as it was (an annotation) is not a new status.
    Json same = Counter("1");
    same["metadata"]["annotations"] = {{"touched", "yes"}};
    std::this_thread::sleep_for(milliseconds(100));
    fake.Add(same);
    std::this_thread::sleep_for(milliseconds(100));
    fake.Add(Counter("2"));
    std::this_thread::sleep_for(milliseconds(100));
    fake.Add(Counter("3"));
  });
  std::vector<std::string> reported;
  WaitOptions<std::string> options;
  options.timeout = std::chrono::seconds(20);
  options.on_progress = [&](const std::string& v) { reported.push_back(v); };
  int judged = 0;
  std::string last = internal::Wait<std::string>(fake.client(), "default", CounterWatch(),
                                                 "Counter default/counter", options,
                                                 [&](const internal::WaitSnapshot& s) {
                                                   ++judged;
                                                   internal::WaitVerdict v;
                                                   v.report = s.synced;
                                                   v.progress = ValueOf(s);
                                                   v.done = s.synced && v.progress == "3";
                                                   return std::pair{ValueOf(s), v};
                                                 });
  writer.join();
  CHECK(last == "3");
  CHECK(reported == std::vector<std::string>{"1", "2", "3"});
  CHECK(judged >= 3);
}

TEST_CASE("wait engine: the judge's failure is reported, then thrown as its own type") {
  testing::FakeCluster fake;
  fake.Add(Counter("broken"));
  std::vector<std::string> reported;
  WaitOptions<std::string> options;
  options.on_progress = [&](const std::string& v) { reported.push_back(v); };
  CHECK_THROWS_WITH_AS(
      internal::Wait<std::string>(
          fake.client(), "default", CounterWatch(), "Counter default/counter", options,
          [&](const internal::WaitSnapshot& s) {
            internal::WaitVerdict v;
            v.report = s.synced;
            v.progress = ValueOf(s);
            // Judged on synced data only, like every workload's judge (an object can be in
            // a snapshot taken just after the engine read its synced flag as false).
            if (s.synced && ValueOf(s) == "broken") {
              v.failure = std::make_exception_ptr(std::runtime_error("the counter is broken"));
            }
            return std::pair{ValueOf(s), v};
          }),
      "the counter is broken", std::runtime_error);
  CHECK(reported == std::vector<std::string>{"broken"});
}

TEST_CASE("wait engine: Timeout names the workload, the goal, the whole duration, the status") {
  testing::FakeCluster fake;
  fake.Add(Counter("1"));
  WaitOptions<std::string> options;
  options.until = WaitUntil::kFinished;
  options.timeout = milliseconds(300);
  auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(internal::Wait<std::string>(fake.client(), "default", CounterWatch(),
                                                   "Counter default/counter", options,
                                                   [&](const internal::WaitSnapshot& s) {
                                                     internal::WaitVerdict v;
                                                     v.progress = ValueOf(s);
                                                     v.message = "value " + ValueOf(s);
                                                     return std::pair{ValueOf(s), v};
                                                   }),
                       "Counter default/counter: not finished after 300 ms: value 1", Timeout);
  CHECK(std::chrono::steady_clock::now() - start >= milliseconds(300));
}

TEST_CASE("wait engine: `cancelled` ends the wait with CancelledError") {
  testing::FakeCluster fake;
  fake.Add(Counter("1"));
  WaitOptions<std::string> options;
  options.timeout = std::chrono::seconds(30);
  const auto start = std::chrono::steady_clock::now();
  options.cancelled = [&] { return std::chrono::steady_clock::now() - start > milliseconds(200); };
  CHECK_THROWS_WITH_AS(
      internal::Wait<std::string>(fake.client(), "default", CounterWatch(),
                                  "Counter default/counter", options,
                                  [&](const internal::WaitSnapshot& s) {
                                    return std::pair{ValueOf(s), internal::WaitVerdict{}};
                                  }),
      "waiting for Counter default/counter was cancelled", CancelledError);
  // Asked at least once a second, not only at the deadline.
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}
