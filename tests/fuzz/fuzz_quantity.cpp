// Harness: resource quantity parsing (Quantity::Parse / TryParse, src/quantity.cpp).
// Properties: only ValidationError escapes; Parse and TryParse agree; the canonical text
// re-parses to the same value, and canonicalising twice is a fixed point. Not once: like
// Kubernetes, a binary-SI value that is no whole multiple of 1024 prints as a plain number
// ("7687.5Ki" -> "7872000"), which then reads as decimal SI ("7872k");
// Value/MilliValue/AsDouble/Sign are consistent; arithmetic either succeeds exactly or throws
// ValidationError.

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "tfk8s/quantity.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tfk8s::fuzz;
  using tfk8s::Quantity;
  std::string text(reinterpret_cast<const char*>(data), size);
  Quantity q;
  std::string why;
  bool try_ok = false;
  Check(Guarded("TryParse", [&] { try_ok = Quantity::TryParse(text, &q, &why); }), "TryParse threw",
        text);
  Quantity p;
  bool parse_ok = Guarded("Parse", [&] { p = Quantity::Parse(text); });
  Check(try_ok == parse_ok, "Parse and TryParse disagree", text);
  if (!parse_ok) return 0;
  Check(p == q, "Parse and TryParse give different values", text);

  std::string canonical;
  Check(Guarded("ToString", [&] { canonical = p.ToString(); }), "ToString threw", text);
  Quantity again;
  Check(Guarded("Parse(ToString)", [&] { again = Quantity::Parse(canonical); }),
        "canonical form does not parse", text + " -> " + canonical);
  Check(again == p, "canonical form changes the value", text + " -> " + canonical);
  const std::string second = again.ToString();
  Quantity third;
  Check(Guarded("Parse(ToString(Parse(ToString)))", [&] { third = Quantity::Parse(second); }),
        "second canonical form does not parse", text + " -> " + canonical + " -> " + second);
  Check(third == p && third.ToString() == second,
        "canonical form is not a fixed point after two steps",
        text + " -> " + canonical + " -> " + second + " -> " + third.ToString());

  Check(p.Sign() >= -1 && p.Sign() <= 1, "Sign out of range", text);
  Check(p.IsZero() == (p.Sign() == 0), "IsZero disagrees with Sign", text);
  if (p.Sign() > 0) Check(p.Value() >= 1 && p.MilliValue() >= 1, "positive rounds to <= 0", text);
  if (p.Sign() < 0) Check(p.Value() <= -1 && p.MilliValue() <= -1, "negative rounds to >= 0", text);
  (void)p.AsDouble();

  // Arithmetic: exact or a ValidationError, never UB (UBSan watches the 128-bit maths).
  Quantity sum = p;
  if (Guarded("operator+=", [&] { sum += p; })) {
    Quantity diff = sum;
    Check(Guarded("operator-=", [&] { diff -= p; }), "(p+p)-p threw", text);
    Check(diff == p, "(p+p)-p != p", text);
  }
  Guarded("Times", [&] { (void)p.Times(static_cast<std::int64_t>(size) - 7); });
  Guarded("Times(INT64_MIN)", [&] { (void)p.Times(INT64_MIN); });
  Check(p.Compare(p) == 0, "Compare(p, p) != 0", text);
  return 0;
}
