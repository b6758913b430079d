#pragma once
/// @file
/// Kubernetes resource quantities ("500m", "1.5Gi", "1e3"), with exact fixed-point arithmetic
/// that matches k8s.io/apimachinery/pkg/api/resource.

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

namespace tfk8s {

/// A resource quantity. Values are exact decimals rounded up (away from zero) to nano units (1n),
/// as Kubernetes does; the suffix format (binary SI, decimal SI, decimal exponent) of the parsed
/// text is kept for formatting, like Kubernetes' canonical form ("1.5Gi" prints as "1536Mi",
/// "0.5" as "500m").
///
/// Range: magnitudes below 10^29 units (10^38 nano units in 128 bits). Kubernetes itself has no
/// bound for decimal values; anything beyond this range is rejected with a ValidationError instead
/// of overflowing. Like Kubernetes, parsing silently caps a binary-SI quantity at 2^63-1
/// ("9Ei" parses as 9223372036854775807).
class Quantity {
 public:
  /// How a quantity prints.
  enum class Format { kDecimalSI, kBinarySI, kDecimalExponent };

  /// Zero ("0").
  Quantity() = default;
  /// Parses Kubernetes quantity syntax: `[+-]digits[.digits]` followed by a binary SI suffix
  /// (Ki Mi Gi Ti Pi Ei), a decimal SI suffix (n u m k M G T P E or none) or a decimal exponent
  /// (e3, E-6). Throws ValidationError (field "quantity", value `text`) on bad or out-of-range
  /// input.
  static Quantity Parse(std::string_view text);
  /// Parses; returns false and sets *why (if not null) instead of throwing. `out` may be null
  /// (syntax check only) and is left unchanged on failure.
  static bool TryParse(std::string_view text, Quantity* out, std::string* why = nullptr);
  /// An integer number of units in `format` (FromInt(4) prints "4"; FromInt(1024,
  /// Format::kBinarySI) prints "1Ki"; FromInt(1000) prints "1k").
  static Quantity FromInt(std::int64_t value, Format format = Format::kDecimalSI);
  /// A number of milli-units (e.g. FromMilli(500) == "500m"), decimal SI.
  static Quantity FromMilli(std::int64_t milli);

  /// Canonical text, as the API server would print it (Kubernetes' CanonicalizeBytes rules).
  [[nodiscard]] std::string ToString() const;
  /// The format used by ToString().
  [[nodiscard]] Format format() const noexcept { return format_; }
  /// Value in units, rounded up away from zero like Kubernetes' Value() ("1.2" gives 2, "-1.2"
  /// gives -2), saturating at INT64 limits.
  [[nodiscard]] std::int64_t Value() const;
  /// Value in milli-units, rounded up away from zero like Kubernetes' MilliValue(), saturating at
  /// INT64 limits.
  [[nodiscard]] std::int64_t MilliValue() const;
  /// Approximate value as a double (for display and ratios only; whole units convert exactly
  /// up to 2^53).
  [[nodiscard]] double AsDouble() const;
  /// -1, 0 or +1.
  [[nodiscard]] int Sign() const noexcept;
  /// True for zero.
  [[nodiscard]] bool IsZero() const noexcept { return Sign() == 0; }

  /// Exact sum; the result keeps the left operand's format (Kubernetes' Add rule) unless that
  /// operand is zero, in which case it takes the right operand's format. Throws ValidationError
  /// when the result leaves the supported range (the operand is then unchanged).
  Quantity& operator+=(const Quantity& other);
  /// Exact difference; same format rule as +=.
  Quantity& operator-=(const Quantity& other);
  /// Exact sum.
  friend Quantity operator+(Quantity a, const Quantity& b) { return a += b; }
  /// Exact difference.
  friend Quantity operator-(Quantity a, const Quantity& b) { return a -= b; }
  /// Multiplies by an integer (e.g. per-replica request × replicas); keeps the format. Throws
  /// ValidationError when the result leaves the supported range.
  [[nodiscard]] Quantity Times(std::int64_t n) const;

  /// Numeric comparison, ignoring the format ("1Gi" == "1024Mi").
  friend bool operator==(const Quantity& a, const Quantity& b) { return a.Compare(b) == 0; }
  /// Numeric ordering.
  friend std::strong_ordering operator<=>(const Quantity& a, const Quantity& b) {
    return a.Compare(b) <=> 0;
  }
  /// -1, 0 or +1 comparing numerically.
  [[nodiscard]] int Compare(const Quantity& other) const noexcept;

 private:
  // value == nanos_ * 10^-9 exactly, |nanos_| < 10^38 (2^127 is about 1.7e38, so sums of two
  // in-range values cannot overflow before the range check). `__extension__` keeps -Wpedantic
  // quiet about the GCC/Clang 128-bit integer in every file that includes this header.
  __extension__ __int128 nanos_ = 0;
  Format format_ = Format::kDecimalSI;
};

/// CPU in cores for tables and messages people read: "31500m" -> "31.5", "250m" -> "0.25",
/// "64" -> "64". At most 2 decimals below 10, 1 below 100, none from 100 on, without trailing
/// zeros (the rule of the Python views' tfk8s._units, which add the word "cores").
[[nodiscard]] std::string FormatCores(const Quantity& cpu);
/// Bytes in binary units for people: "128Gi" -> "128 GiB", "1536Mi" -> "1.5 GiB", "2e9" ->
/// "1.86 GiB", "512" -> "512 B" (KiB, MiB, GiB or TiB, the same decimals as FormatCores).
[[nodiscard]] std::string FormatBytes(const Quantity& bytes);
/// An amount of `resource` for people, by what the name measures: cpu (also requests.cpu,
/// limits.cpu) in cores (FormatCores); memory, storage, ephemeral-storage (and their
/// requests./limits. forms, and <class>.storageclass.storage.k8s.io/requests.storage) in
/// binary units (FormatBytes); anything else (pods, GPUs, object counts) as a whole number, or
/// its canonical text when it is not whole. (The text tables print Kubernetes' notation instead,
/// Quantity::ToString, as kubectl does.)
[[nodiscard]] std::string FormatAmount(std::string_view resource, const Quantity& amount);

}  // namespace tfk8s
