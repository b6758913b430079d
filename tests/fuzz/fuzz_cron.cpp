// Harness: the cron parser and the RFC 3339 timestamp reader (src/workloads/cron.cpp).
// Properties: CronSchedule::Parse throws only ValidationError; for a parsed schedule, Next()
// is strictly later and matches the schedule, Previous() is not later and matches, Between()
// is increasing and bounded; ParseTimestamp never throws, and what it parses formats and
// re-parses to the same instant.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "workloads/cron.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tfk8s::fuzz;
  using tfk8s::internal::CronSchedule;
  using tfk8s::internal::SysSeconds;
  std::string text(reinterpret_cast<const char*>(data), size);

  std::optional<SysSeconds> ts;
  Check(Guarded("ParseTimestamp", [&] { ts = tfk8s::internal::ParseTimestamp(text); }),
        "ParseTimestamp threw", text);
  if (ts) {
    std::string formatted;
    Check(Guarded("FormatTimestamp", [&] { formatted = tfk8s::internal::FormatTimestamp(*ts); }),
          "FormatTimestamp threw", text);
    auto back = tfk8s::internal::ParseTimestamp(formatted);
    Check(back.has_value() && *back == *ts, "timestamp does not round-trip",
          text + " -> " + formatted);
  }

  CronSchedule schedule;
  if (!Guarded("CronSchedule::Parse", [&] { schedule = CronSchedule::Parse(text); })) return 0;
  // 2024-02-29T12:34:56Z: a leap day, mid-minute.
  const SysSeconds at{std::chrono::seconds(1709210096)};
  std::optional<SysSeconds> next;
  Check(Guarded("Next", [&] { next = schedule.Next(at); }), "Next threw", text);
  if (next) {
    Check(*next > at, "Next is not after the start", text);
    Check(schedule.Matches(*next), "Next does not match the schedule", text);
    Check(next->time_since_epoch().count() % 60 == 0, "Next is not on a minute", text);
  }
  std::optional<SysSeconds> previous;
  Check(Guarded("Previous", [&] { previous = schedule.Previous(at); }), "Previous threw", text);
  if (previous) {
    Check(*previous <= at, "Previous is after the start", text);
    Check(schedule.Matches(*previous), "Previous does not match the schedule", text);
  }
  std::vector<SysSeconds> runs;
  Check(
      Guarded("Between", [&] { runs = schedule.Between(at, at + std::chrono::hours(24 * 40), 5); }),
      "Between threw", text);
  Check(runs.size() <= 5, "Between ignores its limit", text);
  for (std::size_t i = 1; i < runs.size(); ++i) {
    Check(runs[i - 1] < runs[i], "Between is not increasing", text);
  }
  if (!runs.empty() && next) Check(runs.front() == *next, "Between's first run != Next", text);
  return 0;
}
