// Cron expressions: the accepted language (Kubernetes' ParseStandard minus @every and TZ
// prefixes), error messages naming the field and the bad part, next/previous run computation
// (day-of-month / day-of-week rules, leap years, year ends), time zones with daylight saving
// (tz database files and their POSIX footer rules), RFC 3339.
#include <doctest/doctest.h>

#include <filesystem>

#include "tfk8s/scheduledjob.hpp"
#include "workloads/cron.hpp"

using namespace tfk8s;
using tfk8s::internal::CronSchedule;
using tfk8s::internal::FormatTimestamp;
using tfk8s::internal::ParseTimestamp;
using tfk8s::internal::SysSeconds;
using tfk8s::internal::TimeZone;

namespace {

SysSeconds T(const char* rfc3339) {
  auto t = ParseTimestamp(rfc3339);
  REQUIRE_MESSAGE(t.has_value(), rfc3339);
  return *t;
}

std::string NextOf(const char* expr, const char* after, const TimeZone& zone = TimeZone()) {
  auto n = CronSchedule::Parse(expr).Next(T(after), zone);
  return n ? FormatTimestamp(*n) : "never";
}

// The ValidationError a bad expression throws.
ValidationError ErrorOf(const std::string& expr) {
  try {
    CronSchedule::Parse(expr);
  } catch (const ValidationError& e) {
    return e;
  }
  FAIL("no error for \"" << expr << "\"");
  return ValidationError("", "", "");
}

bool HaveZone(const char* name) {
  return std::filesystem::exists(std::string("/usr/share/zoneinfo/") + name);
}

}  // namespace

TEST_SUITE("cron") {
  TEST_CASE("valid expressions") {
    for (const char* expr : {"* * * * *",       "0 3 * * *",         "*/15 9-17 * * MON-FRI",
                             "0 0 1 JAN,jul *", "5,10-20/5 * * * *", "0 0 ? * sun",
                             "  0 0 * * *  ",   "0\t0 * * *",        "0 0 1-31/2 * *",
                             "59 23 31 12 6",   "0 0 * * 0-6",       "30 4 1,15 * 5",
                             "0 22 * * 1-5",    "0 0 * FEB-apr *",   "@hourly",
                             "@daily",          "@midnight",         "@weekly",
                             "@monthly",        "@yearly",           "@annually"}) {
      CAPTURE(expr);
      CHECK_NOTHROW(CronSchedule::Parse(expr));
      CHECK_NOTHROW(ValidateCronSchedule(expr));
    }
  }

  TEST_CASE("invalid expressions name the field 'schedule', the bad part and the cron field") {
    struct Case {
      const char* expr;
      const char* value;   // ValidationError::value()
      const char* phrase;  // in what()
    };
    for (const Case& c : std::initializer_list<Case>{
             {"", "", "empty"},
             {"   ", "   ", "empty"},
             {"* * * *", "* * * *", "expected 5 fields"},
             {"* * * * * *", "* * * * * *", "found 6"},
             {"60 * * * *", "60", "minute field (1st"},
             {"* 24 * * *", "24", "hour field"},
             {"* * 0 * *", "0", "below the minimum 1"},
             {"* * 32 * *", "32", "day-of-month"},
             {"* * * 13 *", "13", "month field"},
             {"* * * * 7", "7", "use 0 or SUN for Sunday"},
             {"5-1 * * * *", "5-1", "starts (5) after it ends (1)"},
             {"*/0 * * * *", "*/0", "step must be a positive number"},
             {"*/ * * * *", "*/", "is not a positive number"},
             {"1,,2 * * * *", "1,,2", "empty element"},
             {"a * * * *", "a", "\"a\" is not a number 0-59"},
             {"* * * FOO *", "FOO", "JAN-DEC"},
             {"* * * * MOON", "MOON", "SUN-SAT"},
             {"* * * * * ", "* * * * *", ""},  // trailing blanks are fine: not an error case
             {"1-2-3 * * * *", "1-2-3", "too many '-'"},
             {"1/2/3 * * * *", "1/2/3", "too many '/'"},
             {"-5 * * * *", "-5", "a number is missing"},
             {"@every 5m", "@every 5m", "@every is not supported"},
             {"@often", "@often", "unknown descriptor"},
             {"CRON_TZ=UTC 0 0 * * *", "CRON_TZ=UTC", "set the timeZone field"},
             {"TZ=Europe/Berlin 0 0 * * *", "TZ=Europe/Berlin", "timeZone"},
         }) {
      CAPTURE(c.expr);
      if (std::string(c.phrase).empty()) {
        CHECK_NOTHROW(CronSchedule::Parse(c.expr));
        continue;
      }
      ValidationError e = ErrorOf(c.expr);
      CHECK(e.field() == "schedule");
      CHECK(e.value() == c.value);
      CHECK_MESSAGE(std::string(e.what()).find(c.phrase) != std::string::npos, e.what());
    }
    // The whole expression is quoted for context.
    CHECK(std::string(ErrorOf("0 25 * * *").what()).find("\"0 25 * * *\"") != std::string::npos);
    // A valid expression that never fires is refused by the spec-level check.
    CHECK_THROWS_WITH_AS(ValidateCronSchedule("0 0 30 2 *"), doctest::Contains("never fires"),
                         ValidationError);
  }

  TEST_CASE("next run: steps, ranges, names, strictly after") {
    CHECK(NextOf("*/15 * * * *", "2024-03-01T10:07:30Z") == "2024-03-01T10:15:00Z");
    CHECK(NextOf("*/15 * * * *", "2024-03-01T10:15:00Z") == "2024-03-01T10:30:00Z");
    CHECK(NextOf("* * * * *", "2024-03-01T10:15:59Z") == "2024-03-01T10:16:00Z");
    CHECK(NextOf("0 3 * * *", "2024-03-01T03:00:00Z") == "2024-03-02T03:00:00Z");
    CHECK(NextOf("0 3 * * *", "2024-03-01T02:59:59Z") == "2024-03-01T03:00:00Z");
    CHECK(NextOf("0 9 * * MON-FRI", "2024-03-01T10:00:00Z") == "2024-03-04T09:00:00Z");  // Fri
    CHECK(NextOf("0 9 * * mon-fri", "2024-03-01T08:00:00Z") == "2024-03-01T09:00:00Z");
    CHECK(NextOf("30 4 1,15 * *", "2024-03-02T00:00:00Z") == "2024-03-15T04:30:00Z");
    CHECK(NextOf("0 0 1 JAN *", "2024-06-01T00:00:00Z") == "2025-01-01T00:00:00Z");
    CHECK(NextOf("5/20 * * * *", "2024-03-01T10:46:00Z") == "2024-03-01T11:05:00Z");  // 5,25,45
    CHECK(NextOf("10-20/5 1 * * *", "2024-03-01T01:16:00Z") == "2024-03-01T01:20:00Z");
  }

  TEST_CASE("next run: leap years, month ends, year ends, impossible dates") {
    CHECK(NextOf("0 0 29 2 *", "2023-03-01T00:00:00Z") == "2024-02-29T00:00:00Z");
    CHECK(NextOf("0 0 31 * *", "2024-04-01T00:00:00Z") == "2024-05-31T00:00:00Z");
    CHECK(NextOf("59 23 31 12 *", "2024-12-31T23:59:00Z") == "2025-12-31T23:59:00Z");
    CHECK(NextOf("0 0 * * *", "2024-12-31T23:30:00Z") == "2025-01-01T00:00:00Z");
    CHECK(NextOf("0 0 30 2 *", "2024-01-01T00:00:00Z") == "never");
    CHECK(NextOf("@yearly", "2024-01-01T00:00:00Z") == "2025-01-01T00:00:00Z");
    CHECK(NextOf("@monthly", "2024-01-31T12:00:00Z") == "2024-02-01T00:00:00Z");
    CHECK(NextOf("@weekly", "2024-03-01T00:00:00Z") == "2024-03-03T00:00:00Z");  // Sunday
    CHECK(NextOf("@hourly", "2024-03-01T00:00:00Z") == "2024-03-01T01:00:00Z");
  }

  TEST_CASE("day-of-month and day-of-week: either when both are restricted, both when one is *") {
    // 2024-09-06 is a Friday, 2024-09-13 a Friday the 13th.
    CHECK(NextOf("0 0 13 * FRI", "2024-09-01T00:00:00Z") == "2024-09-06T00:00:00Z");
    CHECK(NextOf("0 0 13 * *", "2024-09-01T00:00:00Z") == "2024-09-13T00:00:00Z");
    CHECK(NextOf("0 0 * * FRI", "2024-09-07T00:00:00Z") == "2024-09-13T00:00:00Z");
    // "*/2" starts with '*': both fields must match (Sundays, Tuesdays, … on any day).
    CHECK(NextOf("0 0 * * */2", "2024-09-02T00:00:00Z") == "2024-09-03T00:00:00Z");
    // "?" is a '*' too.
    CHECK(NextOf("0 0 13 * ?", "2024-09-01T00:00:00Z") == "2024-09-13T00:00:00Z");
  }

  TEST_CASE("previous run and runs between two instants") {
    CronSchedule every15 = CronSchedule::Parse("*/15 * * * *");
    CHECK(FormatTimestamp(*every15.Previous(T("2024-03-01T10:14:59Z"))) == "2024-03-01T10:00:00Z");
    CHECK(FormatTimestamp(*every15.Previous(T("2024-03-01T10:15:00Z"))) == "2024-03-01T10:15:00Z");
    CronSchedule yearly = CronSchedule::Parse("@yearly");
    CHECK(FormatTimestamp(*yearly.Previous(T("2024-06-01T00:00:00Z"))) == "2024-01-01T00:00:00Z");
    CHECK_FALSE(CronSchedule::Parse("0 0 30 2 *").Previous(T("2024-06-01T00:00:00Z")));
    auto runs = every15.Between(T("2024-03-01T10:00:00Z"), T("2024-03-01T11:00:00Z"), 100);
    REQUIRE(runs.size() == 4);  // (10:00, 11:00]
    CHECK(FormatTimestamp(runs.front()) == "2024-03-01T10:15:00Z");
    CHECK(FormatTimestamp(runs.back()) == "2024-03-01T11:00:00Z");
    CHECK(every15.Between(T("2024-03-01T10:00:00Z"), T("2024-03-02T10:00:00Z"), 10).size() == 10);
  }

  TEST_CASE("NextScheduleTimes (public)") {
    auto after = std::chrono::system_clock::time_point(std::chrono::seconds(1709287200));
    auto times = NextScheduleTimes("0 */6 * * *", "", after, 3);  // after 2024-03-01T10:00Z
    REQUIRE(times.size() == 3);
    CHECK(FormatTimestamp(std::chrono::floor<std::chrono::seconds>(times[0])) ==
          "2024-03-01T12:00:00Z");
    CHECK(FormatTimestamp(std::chrono::floor<std::chrono::seconds>(times[2])) ==
          "2024-03-02T00:00:00Z");
    CHECK(NextScheduleTimes("0 0 30 2 *", "", after, 3).empty());
    CHECK_THROWS_AS(NextScheduleTimes("bad", "", after, 1), ValidationError);
  }

  TEST_CASE("time zones: offsets, daylight saving, rules beyond the table") {
    TimeZone utc;
    CHECK(utc.name() == "UTC");
    CHECK(utc.OffsetAt(T("2024-07-01T00:00:00Z")).count() == 0);
    CHECK(TimeZone::Load("").name() == "UTC");
    CHECK(TimeZone::Load("Etc/UTC").name() == "UTC");
    REQUIRE_MESSAGE((HaveZone("Europe/Berlin") && HaveZone("Australia/Sydney")),
                    "no tz database in /usr/share/zoneinfo: tools/install-deps.sh installs tzdata");
    TimeZone berlin = TimeZone::Load("Europe/Berlin");
    CHECK(berlin.OffsetAt(T("2024-01-15T12:00:00Z")).count() == 3600);
    CHECK(berlin.OffsetAt(T("2024-07-15T12:00:00Z")).count() == 7200);
    CHECK(berlin.OffsetAt(T("2024-03-31T00:59:59Z")).count() == 3600);  // switch at 01:00Z
    CHECK(berlin.OffsetAt(T("2024-03-31T01:00:00Z")).count() == 7200);
    CHECK(berlin.OffsetAt(T("2060-07-01T00:00:00Z")).count() == 7200);  // POSIX footer rule
    CHECK(berlin.OffsetAt(T("2060-12-01T00:00:00Z")).count() == 3600);
    TimeZone sydney = TimeZone::Load("Australia/Sydney");
    CHECK(sydney.OffsetAt(T("2024-01-15T00:00:00Z")).count() == 11 * 3600);
    CHECK(sydney.OffsetAt(T("2024-07-15T00:00:00Z")).count() == 10 * 3600);
    CHECK(sydney.OffsetAt(T("2060-01-15T00:00:00Z")).count() == 11 * 3600);  // across New Year
    CHECK(sydney.OffsetAt(T("2060-07-15T00:00:00Z")).count() == 10 * 3600);

    // 03:00 in Berlin is 01:00Z in summer, 02:00Z in winter.
    CHECK(NextOf("0 3 * * *", "2024-07-01T00:00:00Z", berlin) == "2024-07-01T01:00:00Z");
    CHECK(NextOf("0 3 * * *", "2024-12-01T00:00:00Z", berlin) == "2024-12-01T02:00:00Z");
    // 02:30 does not exist on 2024-03-31 in Berlin: it runs when the clock jumps past it.
    CHECK(NextOf("30 2 * * *", "2024-03-30T12:00:00Z", berlin) == "2024-03-31T01:30:00Z");
    // 02:30 happens twice on 2024-10-27: it runs once, at the first one (00:30Z).
    CHECK(NextOf("30 2 * * *", "2024-10-26T12:00:00Z", berlin) == "2024-10-27T00:30:00Z");
    CHECK(NextOf("30 2 * * *", "2024-10-27T00:30:00Z", berlin) == "2024-10-28T01:30:00Z");
    CHECK(NextScheduleTimes("0 3 * * *", "Europe/Berlin",
                            std::chrono::system_clock::time_point(std::chrono::seconds(1719792000)),
                            1)
              .size() == 1);
  }

  TEST_CASE("bad time zones") {
    for (const char* bad : {"Mars/Olympus", "../../etc/passwd", "/etc/localtime", "Europe/Ber lin",
                            "Europe//Berlin/.."}) {
      CAPTURE(bad);
      try {
        TimeZone::Load(bad);
        FAIL("accepted");
      } catch (const ValidationError& e) {
        CHECK(e.field() == "timeZone");
        CHECK(e.value() == bad);
      }
    }
    CHECK_THROWS_WITH_AS(ValidateCronSchedule("0 3 * * *", "Mars/Olympus"),
                         doctest::Contains("unknown time zone"), ValidationError);
  }

  TEST_CASE("RFC 3339") {
    CHECK(FormatTimestamp(T("2024-03-01T12:34:56Z")) == "2024-03-01T12:34:56Z");
    CHECK(FormatTimestamp(T("2024-03-01T12:34:56.789Z")) == "2024-03-01T12:34:56Z");
    CHECK(FormatTimestamp(T("2024-03-01T14:34:56+02:00")) == "2024-03-01T12:34:56Z");
    CHECK(FormatTimestamp(T("2024-03-01T10:04:56-02:30")) == "2024-03-01T12:34:56Z");
    for (const char* bad : {"", "2024-03-01", "2024-03-01T12:34:56", "2024-13-01T00:00:00Z",
                            "2024-02-30T00:00:00Z", "2024-03-01T12:34:56Zjunk", "yesterday"}) {
      CAPTURE(bad);
      CHECK_FALSE(ParseTimestamp(bad).has_value());
    }
  }
}
