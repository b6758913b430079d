#pragma once
// Internal: cron expressions as the Kubernetes CronJob controller reads them, and the time zones
// they run in. Used to validate a schedule before anything is sent and to compute when runs are
// due (missed-schedule alerts, "next runs" for a portal).
//
// The accepted language is what every Kubernetes version's parser (github.com/robfig/cron v1.1
// in ≤ 1.20, v3 later) accepts with ParseStandard, minus two forms that are not portable:
// "@every <duration>" (a fixed delay whose phase depends on the controller, not a calendar) and a
// "CRON_TZ=" / "TZ=" prefix (rejected by ≥ 1.25 servers in favour of spec.timeZone, unknown to
// 1.20). Five fields: minute hour day-of-month month day-of-week; each a comma list of "*", "?",
// "N", "N-M", optionally "/step" ("N/step" means N-max/step); month and day-of-week accept
// three-letter English names (JAN, mon; any case); day-of-week is 0-6 with 0 = Sunday. Like
// Vixie cron, when both day fields are restricted a day matches either of them; when one of them
// starts with "*" both must match.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfk8s::internal {

/// Seconds since the epoch, UTC.
using SysSeconds = std::chrono::sys_seconds;

/// A time zone from the system's tz database (TZif files under $TZDIR or /usr/share/zoneinfo):
/// UTC offsets by instant, including the POSIX rule in the file's footer for instants after the
/// last listed transition.
class TimeZone {
 public:
  /// UTC (also what an empty name means).
  TimeZone();
  /// Loads an IANA zone ("Europe/Berlin", "UTC", "Etc/GMT+3"). Throws ValidationError(field,
  /// name, why) when the name is malformed or the zone is not in the database.
  static TimeZone Load(std::string_view name, std::string_view field = "timeZone");
  /// The zone's name ("UTC" for the default).
  [[nodiscard]] const std::string& name() const;
  /// Offset from UTC (local = utc + offset) at an instant.
  [[nodiscard]] std::chrono::seconds OffsetAt(SysSeconds utc) const;
  /// Local wall-clock time of an instant, expressed as if it were a UTC time point.
  [[nodiscard]] SysSeconds ToLocal(SysSeconds utc) const { return utc + OffsetAt(utc); }

  struct Data;

 private:
  std::shared_ptr<const Data> data_;
};

/// A parsed, validated cron expression.
class CronSchedule {
 public:
  /// Parses `expression`; throws ValidationError(field, the offending part, why) naming the cron
  /// field (minute, hour, …) and the whole expression.
  static CronSchedule Parse(std::string_view expression, std::string_view field = "schedule");

  /// The first scheduled minute strictly after `after`, in wall-clock time of `zone`; nullopt
  /// when none exists within five years (e.g. "0 0 30 2 *").
  [[nodiscard]] std::optional<SysSeconds> Next(SysSeconds after,
                                               const TimeZone& zone = TimeZone()) const;
  /// The last scheduled time at or before `at` (nullopt when none within about five years).
  [[nodiscard]] std::optional<SysSeconds> Previous(SysSeconds at,
                                                   const TimeZone& zone = TimeZone()) const;
  /// Scheduled times in (from, to], at most `limit` of them (stops early).
  [[nodiscard]] std::vector<SysSeconds> Between(SysSeconds from, SysSeconds to, std::size_t limit,
                                                const TimeZone& zone = TimeZone()) const;
  /// Whether a wall-clock minute matches.
  [[nodiscard]] bool Matches(SysSeconds wall) const;
  /// The expression as given.
  [[nodiscard]] const std::string& expression() const { return expression_; }

 private:
  std::optional<SysSeconds> NextWall(SysSeconds wall_after) const;
  bool DayMatches(int day_of_month, int weekday) const;

  std::string expression_;
  std::uint64_t minutes_ = 0;  // bit i set: minute i matches
  std::uint64_t hours_ = 0;
  std::uint64_t days_ = 0;      // bits 1..31
  std::uint64_t months_ = 0;    // bits 1..12
  std::uint64_t weekdays_ = 0;  // bits 0..6, 0 = Sunday
  bool day_star_ = false;       // day-of-month field started with * or ?
  bool weekday_star_ = false;   // day-of-week field started with * or ?
};

/// RFC 3339 in UTC with a "Z" ("2024-03-01T12:00:00Z").
std::string FormatTimestamp(SysSeconds t);
/// Parses the RFC 3339 times Kubernetes writes ("2024-03-01T12:00:00Z", fractions and numeric
/// offsets accepted). nullopt when malformed.
std::optional<SysSeconds> ParseTimestamp(std::string_view text);

}  // namespace tfk8s::internal
