// Cron expressions and tz database zones. Pure: the only I/O is reading a zone file.

#include "workloads/cron.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include "tfk8s/error.hpp"

namespace tfk8s::internal {

using std::chrono::days;
using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::seconds;
using std::chrono::sys_days;

namespace {

// ---- cron fields ------------------------------------------------------------------------------

struct FieldBounds {
  const char* what;     // "minute", …
  const char* ordinal;  // "1st", …
  int min;
  int max;
  const std::array<const char*, 12>* names;  // lower-case names, value = index + name_base
  int name_base;
};

constexpr std::array<const char*, 12> kMonthNames = {"jan", "feb", "mar", "apr", "may", "jun",
                                                     "jul", "aug", "sep", "oct", "nov", "dec"};
constexpr std::array<const char*, 12> kWeekdayNames = {"sun", "mon", "tue", "wed", "thu", "fri",
                                                       "sat", "",    "",    "",    "",    ""};

const FieldBounds kFields[] = {
    {"minute", "1st", 0, 59, nullptr, 0},
    {"hour", "2nd", 0, 23, nullptr, 0},
    {"day-of-month", "3rd", 1, 31, nullptr, 0},
    {"month", "4th", 1, 12, &kMonthNames, 1},
    {"day-of-week", "5th", 0, 6, &kWeekdayNames, 0},
};

std::vector<std::string> Split(std::string_view text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    std::size_t pos = text.find(sep, start);
    out.emplace_back(text.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

class FieldParser {
 public:
  FieldParser(std::string_view expression, std::string_view field)
      : expression_(expression), field_(field) {}

  [[noreturn]] void Fail(const FieldBounds& b, const std::string& part,
                         const std::string& why) const {
    throw ValidationError(
        std::string(field_), part,
        fmt::format("{} field ({} of \"{}\"): {}", b.what, b.ordinal, expression_, why));
  }

  // A number or (month / day-of-week) a three-letter name.
  int Value(const FieldBounds& b, const std::string& element, const std::string& text) const {
    if (text.empty()) Fail(b, element, "a number is missing");
    if (b.names) {
      std::string lower = Lower(text);
      for (std::size_t i = 0; i < b.names->size(); ++i) {
        if (*(*b.names)[i] && lower == (*b.names)[i]) return static_cast<int>(i) + b.name_base;
      }
    }
    if (text.size() > 9 || !std::all_of(text.begin(), text.end(), [](char c) {
          return std::isdigit(static_cast<unsigned char>(c));
        })) {
      std::string expected = b.names == &kMonthNames ? "a number 1-12 or a name JAN-DEC"
                             : b.names == &kWeekdayNames
                                 ? "a number 0-6 or a name SUN-SAT"
                                 : fmt::format("a number {}-{}", b.min, b.max);
      Fail(b, element, fmt::format("\"{}\" is not {}", text, expected));
    }
    return std::atoi(text.c_str());
  }

  // Returns the bit set of one field; *star is set when an element is "*" or "?".
  std::uint64_t Parse(const FieldBounds& b, const std::string& text, bool* star) const {
    std::uint64_t bits = 0;
    *star = false;
    for (const std::string& element : Split(text, ',')) {
      if (element.empty()) Fail(b, text, "empty element in a comma-separated list");
      auto range_and_step = Split(element, '/');
      if (range_and_step.size() > 2) Fail(b, element, "too many '/'");
      int start = 0;
      int end = 0;
      bool single = false;
      const std::string& range = range_and_step[0];
      if (range == "*" || range == "?") {
        start = b.min;
        end = b.max;
        *star = true;
      } else {
        auto low_high = Split(range, '-');
        if (low_high.size() > 2) Fail(b, element, "too many '-'");
        start = Value(b, element, low_high[0]);
        single = low_high.size() == 1;
        end = single ? start : Value(b, element, low_high[1]);
      }
      int step = 1;
      if (range_and_step.size() == 2) {
        const std::string& s = range_and_step[1];
        if (s.empty() || s.size() > 9 || !std::all_of(s.begin(), s.end(), [](char c) {
              return std::isdigit(static_cast<unsigned char>(c));
            })) {
          Fail(b, element, fmt::format("the step \"{}\" is not a positive number", s));
        }
        step = std::atoi(s.c_str());
        if (single) end = b.max;  // "N/step" means N-max/step
      }
      if (start < b.min) {
        Fail(b, element, fmt::format("{} is below the minimum {}", start, b.min));
      }
      if (end > b.max) {
        std::string hint =
            b.names == &kWeekdayNames && end == 7 ? " (use 0 or SUN for Sunday)" : "";
        Fail(b, element, fmt::format("{} is above the maximum {}{}", end, b.max, hint));
      }
      if (start > end) {
        Fail(b, element, fmt::format("the range starts ({}) after it ends ({})", start, end));
      }
      if (step <= 0) Fail(b, element, "the step must be a positive number");
      for (int i = start; i <= end; i += step) bits |= std::uint64_t{1} << i;
    }
    return bits;
  }

 private:
  std::string_view expression_;
  std::string_view field_;
};

std::int64_t Count(std::chrono::sys_seconds t) { return t.time_since_epoch().count(); }

}  // namespace

CronSchedule CronSchedule::Parse(std::string_view expression, std::string_view field) {
  std::string expr(expression);
  // Surrounding blanks are harmless to the server's parser (it splits on whitespace).
  auto first = expr.find_first_not_of(" \t");
  auto last = expr.find_last_not_of(" \t");
  std::string trimmed = first == std::string::npos ? "" : expr.substr(first, last - first + 1);
  if (trimmed.empty()) {
    throw ValidationError(std::string(field), expr,
                          "empty: give a cron expression such as \"0 3 * * *\" or @daily");
  }
  if (trimmed.rfind("CRON_TZ=", 0) == 0 || trimmed.rfind("TZ=", 0) == 0) {
    throw ValidationError(std::string(field), trimmed.substr(0, trimmed.find(' ')),
                          "a time zone prefix is not portable (Kubernetes 1.20 does not know it, "
                          "1.25+ rejects it): set the timeZone field instead");
  }
  CronSchedule s;
  s.expression_ = std::string(expression);
  std::vector<std::string> fields;
  if (trimmed.front() == '@') {
    static const std::pair<const char*, const char*> kDescriptors[] = {
        {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
        {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
        {"@hourly", "0 * * * *"}};
    for (const auto& [name, equivalent] : kDescriptors) {
      if (trimmed == name) {
        CronSchedule parsed = Parse(equivalent, field);
        parsed.expression_ = s.expression_;
        return parsed;
      }
    }
    if (trimmed.rfind("@every", 0) == 0) {
      throw ValidationError(std::string(field), trimmed,
                            "@every is not supported: its runs drift with the controller's clock; "
                            "write the interval as a 5-field expression (e.g. \"*/15 * * * *\")");
    }
    throw ValidationError(std::string(field), trimmed,
                          "unknown descriptor; use @yearly, @annually, @monthly, @weekly, "
                          "@daily, @midnight or @hourly");
  }
  std::istringstream in(trimmed);
  std::string part;
  while (in >> part) fields.push_back(part);
  if (fields.size() != 5) {
    throw ValidationError(
        std::string(field), trimmed,
        fmt::format("expected 5 fields (minute hour day-of-month month day-of-week), found {}",
                    fields.size()));
  }
  FieldParser p(trimmed, field);
  bool ignored = false;
  s.minutes_ = p.Parse(kFields[0], fields[0], &ignored);
  s.hours_ = p.Parse(kFields[1], fields[1], &ignored);
  s.days_ = p.Parse(kFields[2], fields[2], &s.day_star_);
  s.months_ = p.Parse(kFields[3], fields[3], &ignored);
  s.weekdays_ = p.Parse(kFields[4], fields[4], &s.weekday_star_);
  return s;
}

bool CronSchedule::DayMatches(int day_of_month, int weekday) const {
  bool dom = (days_ >> day_of_month) & 1;
  bool dow = (weekdays_ >> weekday) & 1;
  if (day_star_ || weekday_star_) return dom && dow;
  return dom || dow;
}

bool CronSchedule::Matches(SysSeconds wall) const {
  auto day = std::chrono::floor<days>(wall);
  std::chrono::year_month_day ymd{day};
  std::chrono::hh_mm_ss hms{wall - day};
  int weekday = static_cast<int>(std::chrono::weekday{day}.c_encoding());
  return ((months_ >> static_cast<unsigned>(ymd.month())) & 1) &&
         DayMatches(static_cast<int>(static_cast<unsigned>(ymd.day())), weekday) &&
         ((hours_ >> hms.hours().count()) & 1) && ((minutes_ >> hms.minutes().count()) & 1);
}

std::optional<SysSeconds> CronSchedule::NextWall(SysSeconds wall_after) const {
  SysSeconds t = std::chrono::floor<minutes>(wall_after) + minutes(1);
  const int year_limit =
      static_cast<int>(std::chrono::year_month_day{std::chrono::floor<days>(t)}.year()) + 5;
  while (true) {
    auto day = std::chrono::floor<days>(t);
    std::chrono::year_month_day ymd{day};
    if (static_cast<int>(ymd.year()) > year_limit) return std::nullopt;
    if (!((months_ >> static_cast<unsigned>(ymd.month())) & 1)) {
      auto next_month = std::chrono::year_month{ymd.year(), ymd.month()} + std::chrono::months(1);
      t = sys_days{next_month / 1};
      continue;
    }
    int weekday = static_cast<int>(std::chrono::weekday{day}.c_encoding());
    if (!DayMatches(static_cast<int>(static_cast<unsigned>(ymd.day())), weekday)) {
      t = day + days(1);
      continue;
    }
    std::chrono::hh_mm_ss hms{t - day};
    if (!((hours_ >> hms.hours().count()) & 1)) {
      t = day + hms.hours() + hours(1);
      continue;
    }
    if (!((minutes_ >> hms.minutes().count()) & 1)) {
      t += minutes(1);
      continue;
    }
    return t;
  }
}

std::optional<SysSeconds> CronSchedule::Next(SysSeconds after, const TimeZone& zone) const {
  SysSeconds wall = zone.ToLocal(after);
  for (int guard = 0; guard < 100000; ++guard) {
    auto next = NextWall(wall);
    if (!next) return std::nullopt;
    // Map the wall-clock minute back to an instant: the offsets a day before and after cover
    // any transition near it. A repeated wall time (clocks going back) fires once, at its first
    // occurrence, as cron daemons do; a skipped one (clocks going forward) fires at the instant
    // the clock jumps past it.
    SysSeconds first = SysSeconds::max();
    for (seconds off : {zone.OffsetAt(*next - hours(24)), zone.OffsetAt(*next + hours(24))}) {
      SysSeconds u = *next - off;
      if (zone.ToLocal(u) == *next) first = std::min(first, u);
    }
    if (first == SysSeconds::max()) first = *next - zone.OffsetAt(*next - hours(24));
    if (first > after) return first;
    wall = *next;
  }
  return std::nullopt;
}

std::optional<SysSeconds> CronSchedule::Previous(SysSeconds at, const TimeZone& zone) const {
  // Search backwards in growing windows, then walk forward: bounded work whether the schedule
  // fires every minute or once a year.
  for (auto window : {hours(2), hours(50), hours(24 * 32), hours(24 * 367), hours(24 * 1830)}) {
    auto first = Next(at - window, zone);
    if (!first || *first > at) continue;
    SysSeconds last = *first;
    while (true) {
      auto n = Next(last, zone);
      if (!n || *n > at) break;
      last = *n;
    }
    return last;
  }
  return std::nullopt;
}

std::vector<SysSeconds> CronSchedule::Between(SysSeconds from, SysSeconds to, std::size_t limit,
                                              const TimeZone& zone) const {
  std::vector<SysSeconds> out;
  SysSeconds t = from;
  while (out.size() < limit) {
    auto n = Next(t, zone);
    if (!n || *n > to) break;
    out.push_back(*n);
    t = *n;
  }
  return out;
}

// ---- time zones -----------------------------------------------------------------------------

namespace {

// A POSIX TZ rule ("CET-1CEST,M3.5.0,M10.5.0/3") as found in a TZif footer.
struct PosixRule {
  seconds std_offset{0};
  seconds dst_offset{0};
  bool has_dst = false;
  // Transition dates: kind 'M' (month.week.weekday), 'J' (Julian 1-365, no leap day) or 'N'
  // (zero-based day of year counting leap days); time is local time of day of the transition.
  struct Date {
    char kind = 'M';
    int month = 0, week = 0, weekday = 0, day = 0;
    seconds time{7200};
  } start, end;
};

class TzParser {
 public:
  explicit TzParser(std::string_view s) : s_(s) {}
  bool Done() const { return i_ >= s_.size(); }
  bool Peek(char c) const { return i_ < s_.size() && s_[i_] == c; }
  bool Eat(char c) {
    if (!Peek(c)) return false;
    ++i_;
    return true;
  }
  bool Name() {
    if (Eat('<')) {
      while (i_ < s_.size() && s_[i_] != '>') ++i_;
      return Eat('>');
    }
    std::size_t start = i_;
    while (i_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[i_]))) ++i_;
    return i_ - start >= 3;
  }
  bool Number(int* out) {
    std::size_t start = i_;
    int v = 0;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      v = v * 10 + (s_[i_++] - '0');
    }
    *out = v;
    return i_ > start;
  }
  // [+-]hh[:mm[:ss]]
  bool Time(seconds* out) {
    int sign = 1;
    if (Eat('-')) {
      sign = -1;
    } else {
      Eat('+');
    }
    int h = 0, m = 0, sec = 0;
    if (!Number(&h)) return false;
    if (Eat(':') && !Number(&m)) return false;
    if (Eat(':') && !Number(&sec)) return false;
    *out = seconds(sign * (h * 3600 + m * 60 + sec));
    return true;
  }
  bool Date(PosixRule::Date* d) {
    if (Eat('M')) {
      d->kind = 'M';
      if (!Number(&d->month) || !Eat('.') || !Number(&d->week) || !Eat('.') ||
          !Number(&d->weekday)) {
        return false;
      }
    } else if (Eat('J')) {
      d->kind = 'J';
      if (!Number(&d->day)) return false;
    } else {
      d->kind = 'N';
      if (!Number(&d->day)) return false;
    }
    if (Eat('/') && !Time(&d->time)) return false;
    return true;
  }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
};

std::optional<PosixRule> ParsePosixRule(std::string_view text) {
  if (text.empty()) return std::nullopt;
  TzParser p(text);
  PosixRule r;
  seconds posix_offset{0};
  if (!p.Name() || !p.Time(&posix_offset)) return std::nullopt;
  r.std_offset = -posix_offset;  // POSIX offsets are west-positive
  if (p.Done()) return r;
  if (!p.Name()) return std::nullopt;
  r.has_dst = true;
  r.dst_offset = r.std_offset + hours(1);
  if (!p.Peek(',')) {
    if (!p.Time(&posix_offset)) return std::nullopt;
    r.dst_offset = -posix_offset;
  }
  if (!p.Eat(',') || !p.Date(&r.start) || !p.Eat(',') || !p.Date(&r.end) || !p.Done()) {
    return std::nullopt;
  }
  return r;
}

// The local day (as sys_days) a rule date falls on in `year`.
sys_days RuleDay(const PosixRule::Date& d, std::chrono::year year) {
  using namespace std::chrono;
  if (d.kind == 'M') {
    year_month ym{year, month(static_cast<unsigned>(d.month))};
    sys_days first{ym / 1};
    int first_wd = static_cast<int>(weekday{first}.c_encoding());
    int day = 1 + (d.weekday - first_wd + 7) % 7 + (d.week - 1) * 7;
    int last = static_cast<int>(static_cast<unsigned>((ym / std::chrono::last).day()));
    while (day > last) day -= 7;
    return first + days(day - 1);
  }
  sys_days jan1{year / January / 1};
  if (d.kind == 'J') {
    // 1..365, February 29 never counted.
    int n = d.day - 1;
    if (year.is_leap() && d.day >= 60) ++n;
    return jan1 + days(n);
  }
  return jan1 + days(d.day);
}

}  // namespace

struct TimeZone::Data {
  std::string name = "UTC";
  std::vector<std::int64_t> transitions;  // UTC seconds
  std::vector<std::int32_t> offsets;      // offset after each transition
  std::int32_t initial_offset = 0;        // before the first transition
  std::optional<PosixRule> rule;          // after the last transition
};

TimeZone::TimeZone() {
  static const auto kUtc = std::make_shared<const Data>();
  data_ = kUtc;
}

const std::string& TimeZone::name() const { return data_->name; }

namespace {

std::int64_t BigEndian(const unsigned char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  if (bytes == 4) return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
  return static_cast<std::int64_t>(v);
}

}  // namespace

TimeZone TimeZone::Load(std::string_view name, std::string_view field) {
  if (name.empty() || name == "UTC" || name == "Etc/UTC") return TimeZone();
  std::string n(name);
  bool ok = n.front() != '/' && n.find("..") == std::string::npos;
  for (char c : n) {
    ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '_' || c == '-' ||
                c == '+');
  }
  if (!ok) {
    throw ValidationError(std::string(field), n,
                          "not an IANA time zone name such as \"Europe/Berlin\" or "
                          "\"America/New_York\"");
  }
  // Read once per load; nothing in tfk8s sets the environment.
  const char* dir = std::getenv("TZDIR");  // NOLINT(concurrency-mt-unsafe)
  std::string path = std::string(dir && *dir ? dir : "/usr/share/zoneinfo") + "/" + n;
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto bad = [&](const std::string& why) { return ValidationError(std::string(field), n, why); };
  if (!in.good() && bytes.empty()) {
    throw bad("unknown time zone (not in the tz database at " + path + ")");
  }
  if (bytes.size() < 44 || bytes.compare(0, 4, "TZif") != 0) {
    throw bad("unknown time zone (" + path + " is not a TZif file)");
  }
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t size = bytes.size();
  auto header = [&](std::size_t at, std::int64_t counts[6]) {
    if (at + 44 > size) throw bad("truncated zone file " + path);
    for (int i = 0; i < 6; ++i) counts[i] = BigEndian(p + at + 20 + std::size_t{4} * i, 4);
  };
  // Counts: isutcnt, isstdcnt, leapcnt, timecnt, typecnt, charcnt.
  std::int64_t c[6];
  header(0, c);
  char version = bytes[4];
  std::size_t at = 44;
  int time_size = 4;
  if (version >= '2') {
    // Skip the 32-bit block; the 64-bit one follows with its own header.
    at += c[3] * 4 + c[3] + c[4] * 6 + c[5] + c[2] * 8 + c[1] + c[0];
    header(at, c);
    at += 44;
    time_size = 8;
  }
  const std::int64_t timecnt = c[3], typecnt = c[4];
  std::size_t need = at + timecnt * time_size + timecnt + typecnt * 6;
  if (typecnt < 1 || need > size) throw bad("truncated zone file " + path);
  auto data = std::make_shared<Data>();
  data->name = n;
  std::vector<std::int32_t> type_offsets;
  const unsigned char* types = p + at + timecnt * time_size + timecnt;
  for (std::int64_t i = 0; i < typecnt; ++i) {
    type_offsets.push_back(static_cast<std::int32_t>(BigEndian(types + 6 * i, 4)));
  }
  for (std::int64_t i = 0; i < timecnt; ++i) {
    data->transitions.push_back(BigEndian(p + at + i * time_size, time_size));
    unsigned idx = p[at + timecnt * time_size + i];
    if (idx >= type_offsets.size()) throw bad("corrupt zone file " + path);
    data->offsets.push_back(type_offsets[idx]);
  }
  data->initial_offset = type_offsets[0];
  if (version >= '2') {
    std::size_t footer = need + c[5] + c[2] * 12 + c[1] + c[0];
    if (footer < size && bytes[footer] == '\n') {
      auto end = bytes.find('\n', footer + 1);
      if (end != std::string::npos) {
        data->rule = ParsePosixRule(std::string_view(bytes).substr(footer + 1, end - footer - 1));
      }
    }
  }
  TimeZone tz;
  tz.data_ = std::move(data);
  return tz;
}

seconds TimeZone::OffsetAt(SysSeconds utc) const {
  const Data& d = *data_;
  std::int64_t t = Count(utc);
  if (!d.transitions.empty() && t < d.transitions.front()) return seconds(d.initial_offset);
  if (d.rule && (d.transitions.empty() || t >= d.transitions.back())) {
    const PosixRule& r = *d.rule;
    if (!r.has_dst) return r.std_offset;
    auto year = std::chrono::year_month_day{std::chrono::floor<days>(utc)}.year();
    // DST is in force between the start (given in standard time) and the end (in DST); check
    // the neighbouring years too for instants near New Year and southern-hemisphere rules.
    for (int dy : {-1, 0, 1}) {
      auto y = year + std::chrono::years(dy);
      SysSeconds start = SysSeconds(RuleDay(r.start, y)) + r.start.time - r.std_offset;
      SysSeconds end = SysSeconds(RuleDay(r.end, y)) + r.end.time - r.dst_offset;
      if (start < end) {
        if (utc >= start && utc < end) return r.dst_offset;
      } else {
        // Southern hemisphere: DST spans New Year (start late in year y, end early in y+1).
        SysSeconds next_end =
            SysSeconds(RuleDay(r.end, y + std::chrono::years(1))) + r.end.time - r.dst_offset;
        if (utc >= start && utc < next_end) return r.dst_offset;
      }
    }
    return r.std_offset;
  }
  if (d.transitions.empty()) return seconds(d.initial_offset);
  auto it = std::upper_bound(d.transitions.begin(), d.transitions.end(), t);
  return seconds(d.offsets[std::distance(d.transitions.begin(), it) - 1]);
}

// ---- RFC 3339 -------------------------------------------------------------------------------

std::string FormatTimestamp(SysSeconds t) {
  auto day = std::chrono::floor<days>(t);
  std::chrono::year_month_day ymd{day};
  std::chrono::hh_mm_ss hms{t - day};
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", static_cast<int>(ymd.year()),
                     static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                     hms.hours().count(), hms.minutes().count(), hms.seconds().count());
}

std::optional<SysSeconds> ParseTimestamp(std::string_view s) {
  auto num = [&](std::size_t at, std::size_t len, int* out) {
    if (at + len > s.size()) return false;
    int v = 0;
    for (std::size_t i = at; i < at + len; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
      v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
  };
  int y, mo, d, h, mi, se;
  if (!num(0, 4, &y) || s.size() < 20 || s[4] != '-' || !num(5, 2, &mo) || s[7] != '-' ||
      !num(8, 2, &d) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || !num(11, 2, &h) ||
      s[13] != ':' || !num(14, 2, &mi) || s[16] != ':' || !num(17, 2, &se)) {
    return std::nullopt;
  }
  std::size_t i = 19;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  }
  seconds offset{0};
  if (i < s.size() && (s[i] == 'Z' || s[i] == 'z')) {
    ++i;
  } else if (i < s.size() && (s[i] == '+' || s[i] == '-')) {
    int oh, om;
    if (!num(i + 1, 2, &oh) || i + 3 >= s.size() || s[i + 3] != ':' || !num(i + 4, 2, &om)) {
      return std::nullopt;
    }
    offset = seconds((oh * 3600 + om * 60) * (s[i] == '-' ? -1 : 1));
    i += 6;
  } else {
    return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  std::chrono::year_month_day ymd{std::chrono::year(y), std::chrono::month(mo),
                                  std::chrono::day(d)};
  if (!ymd.ok() || h > 23 || mi > 59 || se > 60) return std::nullopt;
  return SysSeconds(sys_days(ymd)) + hours(h) + minutes(mi) + seconds(se) - offset;
}

}  // namespace tfk8s::internal
