// Kubernetes resource quantities, following k8s.io/apimachinery/pkg/api/resource (quantity.go,
// suffix.go, amount.go). The Go code keeps an int64 fast path next to an arbitrary-precision
// inf.Dec; after parsing, every Go value is an exact decimal rounded up to nano precision, so a
// single 128-bit count of nano units represents the same values exactly (within our range).

#include "tfk8s/quantity.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "tfk8s/error.hpp"

namespace tfk8s {
namespace {

__extension__ typedef __int128 Int128;
__extension__ typedef unsigned __int128 UInt128;

constexpr Int128 Pow10(int n) {
  Int128 r = 1;
  for (int i = 0; i < n; ++i) r *= 10;
  return r;
}

constexpr Int128 kNanosPerUnit = Pow10(9);
constexpr Int128 kNanosPerMilli = Pow10(6);
// Number of decimal digits a magnitude in nano units may have (|nanos| < 10^38).
constexpr int kMaxNanoDigits = 38;
constexpr Int128 kMaxAbsNanos = Pow10(kMaxNanoDigits) - 1;
// Kubernetes caps parsed binary-SI quantities at MaxInt64 units ("maxAllowed" in quantity.go).
constexpr Int128 kBinarySiCapNanos =
    Int128{std::numeric_limits<std::int64_t>::max()} * kNanosPerUnit;

// Error texts of quantity.go (ErrFormatWrong, ErrSuffix), so messages match what kubectl and the
// API server print for the same input.
constexpr std::string_view kErrFormatWrong =
    "quantities must match the regular expression "
    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
constexpr std::string_view kErrSuffix = "unable to parse quantity's suffix";
constexpr std::string_view kErrRange =
    "quantity is out of range: tfk8s supports magnitudes below 10^29 (exact to 1n)";

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

struct Suffix {
  enum class Base { kTen, kTwo } base;
  std::int64_t exponent;  // power of 10 or power of 2
  Quantity::Format format;
};

// Mirrors suffixHandler.interpret in suffix.go.
std::optional<Suffix> InterpretSuffix(std::string_view s) {
  using F = Quantity::Format;
  static constexpr std::array<std::pair<std::string_view, int>, 10> kDecimal = {{
      {"n", -9},
      {"u", -6},
      {"m", -3},
      {"", 0},
      {"k", 3},
      {"M", 6},
      {"G", 9},
      {"T", 12},
      {"P", 15},
      {"E", 18},
  }};
  static constexpr std::array<std::pair<std::string_view, int>, 6> kBinary = {{
      {"Ki", 10},
      {"Mi", 20},
      {"Gi", 30},
      {"Ti", 40},
      {"Pi", 50},
      {"Ei", 60},
  }};
  for (const auto& [name, exp] : kDecimal) {
    if (s == name) return Suffix{Suffix::Base::kTen, exp, F::kDecimalSI};
  }
  for (const auto& [name, exp] : kBinary) {
    if (s == name) return Suffix{Suffix::Base::kTwo, exp, F::kBinarySI};
  }
  // "e<int>" / "E<int>": Go uses strconv.ParseInt, so an optional sign, at least one digit and
  // the int64 range are required.
  if (s.size() < 2 || (s[0] != 'e' && s[0] != 'E')) return std::nullopt;
  std::string_view num = s.substr(1);
  bool negative = false;
  if (num[0] == '+' || num[0] == '-') {
    negative = num[0] == '-';
    num.remove_prefix(1);
  }
  if (num.empty()) return std::nullopt;
  Int128 value = 0;
  for (char c : num) {
    if (!IsDigit(c)) return std::nullopt;
    value = value * 10 + (c - '0');
    if (value > Int128{std::numeric_limits<std::int64_t>::max()} + 1) return std::nullopt;
  }
  if (negative) value = -value;
  if (value > std::numeric_limits<std::int64_t>::max()) return std::nullopt;
  return Suffix{Suffix::Base::kTen, static_cast<std::int64_t>(value), F::kDecimalExponent};
}

// True when `s` has the shape parseQuantityString accepts after the number:
// [eEinumkKMGTP]* [+-]? [0-9]* and nothing else.
bool SuffixShapeOk(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && std::string_view("eEinumkKMGTP").find(s[i]) != std::string_view::npos) {
    ++i;
  }
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  while (i < s.size() && IsDigit(s[i])) ++i;
  return i == s.size();
}

// Multiplies a decimal digit string by 2 in place (most significant digit first).
void DoubleDigits(std::string& digits) {
  int carry = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    int d = (*it - '0') * 2 + carry;
    *it = static_cast<char>('0' + d % 10);
    carry = d / 10;
  }
  if (carry != 0) digits.insert(digits.begin(), static_cast<char>('0' + carry));
}

std::string ToDecimal(UInt128 v) {
  if (v == 0) return "0";
  std::string out;
  while (v != 0) {
    out.push_back(static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

UInt128 Magnitude(Int128 v) { return v < 0 ? UInt128(0) - static_cast<UInt128>(v) : UInt128(v); }

Int128 Abs(Int128 v) { return v < 0 ? -v : v; }

struct ParseResult {
  Int128 nanos = 0;
  Quantity::Format format = Quantity::Format::kDecimalSI;
};

// Parses `text`; returns the error reason on failure. The value is computed exactly from the
// digit string, rounded up (away from zero) to 1n as quantity.go does with inf.RoundUp.
std::optional<std::string_view> ParseImpl(std::string_view text, ParseResult* out) {
  if (text.empty()) return kErrFormatWrong;
  std::size_t pos = 0;
  bool negative = false;
  if (text[0] == '+' || text[0] == '-') {
    negative = text[0] == '-';
    ++pos;
  }
  const std::size_t int_begin = pos;
  while (pos < text.size() && IsDigit(text[pos])) ++pos;
  std::string_view int_digits = text.substr(int_begin, pos - int_begin);
  std::string_view frac_digits;
  if (pos < text.size() && text[pos] == '.') {
    const std::size_t frac_begin = ++pos;
    while (pos < text.size() && IsDigit(text[pos])) ++pos;
    frac_digits = text.substr(frac_begin, pos - frac_begin);
  }
  // Kubernetes' documented grammar needs at least one digit ("1.", ".5" and "1.G" are fine).
  // Its hand-written scanner happens to read digit-less text such as "-", ".", "Ki" or "e3" as
  // zero (but rejects ".Ei"); we reject all of those rather than copy the accident.
  if (int_digits.empty() && frac_digits.empty()) return kErrFormatWrong;
  const std::string_view suffix_text = text.substr(pos);
  if (!SuffixShapeOk(suffix_text)) return kErrFormatWrong;
  const std::optional<Suffix> suffix = InterpretSuffix(suffix_text);
  if (!suffix) return kErrSuffix;

  // digits * 10^(exp10 - frac_len) is the value in units (times 2^exp2 for binary suffixes).
  std::string digits;
  digits.reserve(int_digits.size() + frac_digits.size() + 20);
  digits.append(int_digits);
  digits.append(frac_digits);
  const auto first_nonzero = digits.find_first_not_of('0');
  out->format = suffix->format;
  if (first_nonzero == std::string::npos) {  // zero keeps its suffix's format ("0Ki" is binary)
    out->nanos = 0;
    return std::nullopt;
  }
  digits.erase(0, first_nonzero);
  Int128 exp10 = 0;
  if (suffix->base == Suffix::Base::kTwo) {
    for (std::int64_t i = 0; i < suffix->exponent; ++i) DoubleDigits(digits);
  } else {
    exp10 = suffix->exponent;
  }
  // Shift so that the digit string counts nano units: nanos = digits * 10^shift.
  const Int128 shift = exp10 - static_cast<Int128>(frac_digits.size()) + 9;
  const Int128 len = static_cast<Int128>(digits.size());
  bool too_large = false;
  Int128 nanos = 0;
  if (shift >= 0) {
    if (len + shift > kMaxNanoDigits) {
      too_large = true;
    } else {
      for (char c : digits) nanos = nanos * 10 + (c - '0');
      nanos *= Pow10(static_cast<int>(shift));
    }
  } else {
    const Int128 keep = len + shift;  // digits at or above the nano position
    if (keep <= 0) {
      nanos = 1;  // a non-zero amount below 1n rounds up to 1n
    } else if (keep > kMaxNanoDigits) {
      too_large = true;
    } else {
      const auto k = static_cast<std::size_t>(keep);
      for (std::size_t i = 0; i < k; ++i) nanos = nanos * 10 + (digits[i] - '0');
      if (digits.find_first_not_of('0', k) != std::string::npos) ++nanos;  // round up
      if (nanos > kMaxAbsNanos) too_large = true;
    }
  }
  if (suffix->format == Quantity::Format::kBinarySI) {
    // Kubernetes silently caps binary SI at MaxInt64 units; the cap is within our range.
    if (too_large || nanos > kBinarySiCapNanos) {
      too_large = false;
      nanos = kBinarySiCapNanos;
    }
    // A binary value between 0 and 1 would round when printed, so Kubernetes switches it to
    // decimal SI (".000000000001Ki" is "2n").
    if (nanos < kNanosPerUnit) out->format = Quantity::Format::kDecimalSI;
  }
  if (too_large) return kErrRange;
  out->nanos = negative ? -nanos : nanos;
  return std::nullopt;
}

[[noreturn]] void ThrowRange(const std::string& expression) {
  throw ValidationError("quantity", expression, std::string(kErrRange));
}

// Rounds nanos / divisor away from zero and saturates at the int64 limits.
std::int64_t ScaledAwayFromZero(Int128 nanos, Int128 divisor) {
  Int128 q = nanos / divisor;
  const Int128 r = nanos % divisor;
  if (r > 0) ++q;
  if (r < 0) --q;
  if (q > std::numeric_limits<std::int64_t>::max()) return std::numeric_limits<std::int64_t>::max();
  if (q < std::numeric_limits<std::int64_t>::min()) return std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(q);
}

}  // namespace

Quantity Quantity::Parse(std::string_view text) {
  Quantity q;
  std::string why;
  if (!TryParse(text, &q, &why)) throw ValidationError("quantity", std::string(text), why);
  return q;
}

bool Quantity::TryParse(std::string_view text, Quantity* out, std::string* why) {
  ParseResult result;
  if (const auto error = ParseImpl(text, &result)) {
    if (why != nullptr) *why = std::string(*error);
    return false;
  }
  if (out != nullptr) {
    out->nanos_ = result.nanos;
    out->format_ = result.format;
  }
  return true;
}

Quantity Quantity::FromInt(std::int64_t value, Format format) {
  Quantity q;
  q.nanos_ = Int128{value} * kNanosPerUnit;  // |value| <= 2^63, so this stays below 10^38
  q.format_ = format;
  return q;
}

Quantity Quantity::FromMilli(std::int64_t milli) {
  Quantity q;
  q.nanos_ = Int128{milli} * kNanosPerMilli;
  q.format_ = Format::kDecimalSI;
  return q;
}

std::string Quantity::ToString() const {
  // CanonicalizeBytes in quantity.go.
  if (nanos_ == 0) return "0";
  const UInt128 mag = Magnitude(nanos_);
  Format format = format_;
  if (format == Format::kBinarySI) {
    // Between -1024 and 1024 binary SI has no suffix to offer and would hide fractions; a value
    // that is not a whole number of units cannot be written in binary SI without rounding.
    if (mag < static_cast<UInt128>(1024 * kNanosPerUnit) ||
        mag % static_cast<UInt128>(kNanosPerUnit) != 0) {
      format = Format::kDecimalSI;
    }
  }
  std::string out = nanos_ < 0 ? "-" : "";
  if (format == Format::kBinarySI) {
    static constexpr std::array<std::string_view, 7> kBinary = {"",   "Ki", "Mi", "Gi",
                                                                "Ti", "Pi", "Ei"};
    UInt128 units = mag / static_cast<UInt128>(kNanosPerUnit);
    std::size_t power = 0;
    // Stop at Ei: Kubernetes has no larger binary suffix (Go would drop the suffix of 1024Ei).
    while (power + 1 < kBinary.size() && units % 1024 == 0) {
      units /= 1024;
      ++power;
    }
    return out + ToDecimal(units) + std::string(kBinary[power]);
  }
  // Decimal: strip factors of ten into the exponent, then lower the exponent to a multiple of 3
  // (multiplying back at most the factors just removed, so this cannot overflow).
  UInt128 mantissa = mag;
  int exponent = -9;
  while (mantissa % 10 == 0) {
    mantissa /= 10;
    ++exponent;
  }
  while (exponent % 3 != 0) {
    mantissa *= 10;
    --exponent;
  }
  out += ToDecimal(mantissa);
  if (format == Format::kDecimalSI && exponent >= -9 && exponent <= 18) {
    static constexpr std::array<std::string_view, 10> kDecimal = {"n", "u", "m", "",  "k",
                                                                  "M", "G", "T", "P", "E"};
    out += kDecimal[static_cast<std::size_t>((exponent + 9) / 3)];
  } else if (exponent != 0) {
    // Decimal exponent, and decimal SI beyond "E": Kubernetes falls back to "e<exp>" rather than
    // dropping the magnitude ("1000E" prints as "1e21").
    out += 'e';
    out += std::to_string(exponent);
  }
  return out;
}

std::int64_t Quantity::Value() const { return ScaledAwayFromZero(nanos_, kNanosPerUnit); }

std::int64_t Quantity::MilliValue() const { return ScaledAwayFromZero(nanos_, kNanosPerMilli); }

double Quantity::AsDouble() const {
  // Whole units convert with a single rounding; otherwise two roundings are fine for display.
  if (nanos_ % kNanosPerUnit == 0) {
    return static_cast<double>(nanos_ / kNanosPerUnit);  // NOLINT(bugprone-integer-division): exact
  }
  return static_cast<double>(nanos_) / 1e9;
}

int Quantity::Sign() const noexcept { return nanos_ > 0 ? 1 : (nanos_ < 0 ? -1 : 0); }

int Quantity::Compare(const Quantity& other) const noexcept {
  return nanos_ < other.nanos_ ? -1 : (nanos_ > other.nanos_ ? 1 : 0);
}

Quantity& Quantity::operator+=(const Quantity& other) {
  // Both operands are below 10^38 in magnitude, but 2 * 10^38 exceeds 2^127 (about 1.7e38):
  // the sum itself can overflow (found by tests/fuzz/fuzz_quantity), so it is checked too.
  Int128 sum = 0;
  if (__builtin_add_overflow(nanos_, other.nanos_, &sum) || Abs(sum) > kMaxAbsNanos) {
    ThrowRange(ToString() + " + " + other.ToString());
  }
  if (nanos_ == 0) format_ = other.format_;  // Kubernetes: a zero receiver adopts y's format
  nanos_ = sum;
  return *this;
}

Quantity& Quantity::operator-=(const Quantity& other) {
  Int128 difference = 0;
  if (__builtin_sub_overflow(nanos_, other.nanos_, &difference) || Abs(difference) > kMaxAbsNanos) {
    ThrowRange(ToString() + " - " + other.ToString());
  }
  if (nanos_ == 0) format_ = other.format_;
  nanos_ = difference;
  return *this;
}

Quantity Quantity::Times(std::int64_t n) const {
  // Checked by division rather than __builtin_mul_overflow, whose signed 128-bit form needs
  // compiler-rt (__muloti4) under Clang with libgcc.
  const Int128 factor = n;
  if (factor != 0 && Abs(nanos_) > kMaxAbsNanos / Abs(factor)) {
    ThrowRange(ToString() + " * " + std::to_string(n));
  }
  Quantity q = *this;
  q.nanos_ = nanos_ * factor;
  return q;
}

// ---- for people ---------------------------------------------------------------------------

namespace {

// `value` with at most 2 decimals below 10, 1 below 100, none above; no trailing zeros.
std::string Decimal(double value) {
  const double magnitude = value < 0 ? -value : value;
  const int decimals = magnitude < 10 ? 2 : (magnitude < 100 ? 1 : 0);
  std::string text = fmt::format("{:.{}f}", value, decimals);
  if (text.find('.') != std::string::npos) {
    text.erase(text.find_last_not_of('0') + 1);
    if (text.back() == '.') text.pop_back();
  }
  return text == "-0" ? "0" : text;
}

enum class Measure { kCpu, kBytes, kCount };

Measure MeasureOf(std::string_view resource) {
  std::string_view name = resource;
  for (std::string_view prefix : {"requests.", "limits."}) {
    if (name.substr(0, prefix.size()) == prefix) {
      name.remove_prefix(prefix.size());
      break;
    }
  }
  if (name == "cpu") return Measure::kCpu;
  constexpr std::string_view kStorage = ".storage";
  const bool storage_class = resource.size() > kStorage.size() &&
                             resource.substr(resource.size() - kStorage.size()) == kStorage;
  if (name == "memory" || name == "storage" || name == "ephemeral-storage" || storage_class) {
    return Measure::kBytes;
  }
  return Measure::kCount;
}

}  // namespace

std::string FormatCores(const Quantity& cpu) {
  return Decimal(static_cast<double>(cpu.MilliValue()) / 1000.0);
}

std::string FormatBytes(const Quantity& bytes) {
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0}};
  const double amount = bytes.AsDouble();
  const double magnitude = amount < 0 ? -amount : amount;
  for (const auto& [unit, size] : kUnits) {
    if (magnitude >= size) return Decimal(amount / size) + " " + std::string(unit);
  }
  return Decimal(amount) + " B";
}

std::string FormatAmount(std::string_view resource, const Quantity& amount) {
  switch (MeasureOf(resource)) {
    case Measure::kCpu:
      return FormatCores(amount);
    case Measure::kBytes:
      return FormatBytes(amount);
    case Measure::kCount:
      break;
  }
  if (amount.MilliValue() % 1000 != 0) return amount.ToString();
  return std::to_string(amount.Value());
}

}  // namespace tfk8s
