// Tests for tfk8s::Quantity. Vectors come from Kubernetes' own
// k8s.io/apimachinery/pkg/api/resource/quantity_test.go (TestQuantityParse, TestQuantityString,
// TestQuantityParseEmit, TestParseQuantity, TestAdd/TestSub/TestMul, TestQuantityCmp, ...),
// with the expected canonical text worked out from Kubernetes' CanonicalizeBytes rules.

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfk8s/error.hpp"
#include "tfk8s/quantity.hpp"

namespace {

using tfk8s::Quantity;
using F = Quantity::Format;

struct ParseCase {
  std::string_view input;
  std::string_view canonical;
  F format;
};

// TestQuantityParse's table: input, the canonical text Kubernetes prints, and the format kept.
const std::vector<ParseCase> kParseCases = {
    {"0", "0", F::kDecimalSI},
    {"0n", "0", F::kDecimalSI},
    {"0u", "0", F::kDecimalSI},
    {"0m", "0", F::kDecimalSI},
    {"0Ki", "0", F::kBinarySI},
    {"0k", "0", F::kDecimalSI},
    {"0Mi", "0", F::kBinarySI},
    {"0M", "0", F::kDecimalSI},
    {"0Gi", "0", F::kBinarySI},
    {"0G", "0", F::kDecimalSI},
    {"0Ti", "0", F::kBinarySI},
    {"0T", "0", F::kDecimalSI},
    // Quantity-less numbers are allowed.
    {"1", "1", F::kDecimalSI},
    // Binary suffixes.
    {"1Ki", "1Ki", F::kBinarySI},
    {"8Ki", "8Ki", F::kBinarySI},
    {"7Mi", "7Mi", F::kBinarySI},
    {"6Gi", "6Gi", F::kBinarySI},
    {"5Ti", "5Ti", F::kBinarySI},
    {"4Pi", "4Pi", F::kBinarySI},
    {"3Ei", "3Ei", F::kBinarySI},
    {"10Ti", "10Ti", F::kBinarySI},
    {"100Ti", "100Ti", F::kBinarySI},
    // Decimal suffixes.
    {"5n", "5n", F::kDecimalSI},
    {"4u", "4u", F::kDecimalSI},
    {"3m", "3m", F::kDecimalSI},
    {"9", "9", F::kDecimalSI},
    {"8k", "8k", F::kDecimalSI},
    {"50k", "50k", F::kDecimalSI},
    {"7M", "7M", F::kDecimalSI},
    {"6G", "6G", F::kDecimalSI},
    {"5T", "5T", F::kDecimalSI},
    {"40T", "40T", F::kDecimalSI},
    {"300T", "300T", F::kDecimalSI},
    {"2P", "2P", F::kDecimalSI},
    {"1E", "1E", F::kDecimalSI},
    // Decimal exponents.
    {"1E-3", "1e-3", F::kDecimalExponent},
    {"1e3", "1e3", F::kDecimalExponent},
    {"1E6", "1e6", F::kDecimalExponent},
    {"1e9", "1e9", F::kDecimalExponent},
    {"1E12", "1e12", F::kDecimalExponent},
    {"1e15", "1e15", F::kDecimalExponent},
    {"1E18", "1e18", F::kDecimalExponent},
    // Nonstandard but still parsable.
    {"1e14", "100e12", F::kDecimalExponent},
    {"1e13", "10e12", F::kDecimalExponent},
    {"100.035k", "100035", F::kDecimalSI},
    // Things that look like floating point.
    {"0.001", "1m", F::kDecimalSI},
    {"0.0005k", "500m", F::kDecimalSI},
    {"0.005", "5m", F::kDecimalSI},
    {"0.05", "50m", F::kDecimalSI},
    {"0.5", "500m", F::kDecimalSI},
    {"0.00050k", "500m", F::kDecimalSI},
    {"0.00500", "5m", F::kDecimalSI},
    {"0.05000", "50m", F::kDecimalSI},
    {"0.50000", "500m", F::kDecimalSI},
    {"0.5e0", "500e-3", F::kDecimalExponent},
    {"0.5e-1", "50e-3", F::kDecimalExponent},
    {"0.5e-2", "5e-3", F::kDecimalExponent},
    {"10.035M", "10035k", F::kDecimalSI},
    {"1.2e3", "1200", F::kDecimalExponent},
    {"1.3E+6", "1300e3", F::kDecimalExponent},
    {"1.40e9", "1400e6", F::kDecimalExponent},
    {"1.53E12", "1530e9", F::kDecimalExponent},
    {"1.6e15", "1600e12", F::kDecimalExponent},
    {"1.7E18", "1700e15", F::kDecimalExponent},
    {"9.01", "9010m", F::kDecimalSI},
    {"8.1k", "8100", F::kDecimalSI},
    {"7.123456M", "7123456", F::kDecimalSI},
    {"6.987654321G", "6987654321", F::kDecimalSI},
    {"5.444T", "5444G", F::kDecimalSI},
    {"40.1T", "40100G", F::kDecimalSI},
    {"300.2T", "300200G", F::kDecimalSI},
    {"2.5P", "2500T", F::kDecimalSI},
    {"1.01E", "1010P", F::kDecimalSI},
    // Things that saturate or round (up, to 1n).
    {"3.001n", "4n", F::kDecimalSI},
    {"1.1E-9", "2e-9", F::kDecimalExponent},
    {"0.0000000001", "1n", F::kDecimalSI},
    {"0.0000000005", "1n", F::kDecimalSI},
    {"0.00000000050", "1n", F::kDecimalSI},
    {"0.5e-9", "1e-9", F::kDecimalExponent},
    {"0.9n", "1n", F::kDecimalSI},
    {"0.00000012345", "124n", F::kDecimalSI},
    {"0.00000012354", "124n", F::kDecimalSI},
    {"9Ei", "9223372036854775807", F::kBinarySI},
    {"9223372036854775807Ki", "9223372036854775807", F::kBinarySI},
    {"12E", "12E", F::kDecimalSI},
    // Fractional binary quantities: kept binary, printed as decimal when not whole.
    {"100.035Ki", "102435840m", F::kBinarySI},
    {"0.5Mi", "512Ki", F::kBinarySI},
    {"0.05Gi", "53687091200m", F::kBinarySI},
    {"0.025Ti", "27487790694400m", F::kBinarySI},
    // "Things written by trolls".
    {"0.000000000001Ki", "2n", F::kDecimalSI},  // rounds up, changes format
    {".001", "1m", F::kDecimalSI},
    {".0001k", "100m", F::kDecimalSI},
    {"1.", "1", F::kDecimalSI},
    {"1.G", "1G", F::kDecimalSI},
};

std::string ParseError(std::string_view text) {
  try {
    (void)Quantity::Parse(text);
  } catch (const tfk8s::ValidationError& e) {
    CHECK(e.field() == "quantity");
    CHECK(e.value() == text);
    CHECK(e.kind() == tfk8s::ErrorKind::kValidation);
    return e.what();
  }
  FAIL("expected a ValidationError for \"" << text << "\"");
  return {};
}

}  // namespace

TEST_SUITE("quantity") {
  TEST_CASE("parse: Kubernetes TestQuantityParse vectors, canonical text and format") {
    for (const auto& c : kParseCases) {
      CAPTURE(c.input);
      const Quantity q = Quantity::Parse(c.input);
      CHECK(q.ToString() == c.canonical);
      CHECK(q.format() == c.format);
      // The canonical text denotes the same value.
      CHECK(Quantity::Parse(c.canonical) == q);
    }
  }

  TEST_CASE("parse: negative and explicitly positive versions of every vector") {
    for (const auto& c : kParseCases) {
      CAPTURE(c.input);
      const Quantity plain = Quantity::Parse(c.input);
      const Quantity negative = Quantity::Parse("-" + std::string(c.input));
      const Quantity positive = Quantity::Parse("+" + std::string(c.input));
      CHECK(positive == plain);
      CHECK(positive.format() == c.format);
      CHECK(negative.format() == c.format);
      CHECK(negative == Quantity() - plain);
      CHECK(negative.Sign() == -plain.Sign());
      // Never "-0".
      const std::string expected = plain.IsZero() ? "0" : "-" + std::string(c.canonical);
      CHECK(negative.ToString() == expected);
    }
  }

  TEST_CASE("parse: invalid inputs from TestQuantityParse and more") {
    const std::vector<std::string_view> invalid = {
        "", "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-",
        // Leading and trailing whitespace is forbidden.
        " 1", "1 ",
        // More: unknown suffixes, malformed exponents, double signs, bare signs/suffixes.
        "Non-Numeric", "1K", "1ki", "1e", "1E+", "1e3e3", "1.5 Gi", "--1", "+-1", "1Gi ", "1GiB",
        "1e99999999999999999999", "0x10", "1,5",
        // No digit at all: Kubernetes' scanner reads some of these as zero by accident; its
        // documented grammar (and tfk8s) requires a digit.
        "-", "+", ".", "-.", "+.", ".Ki", ".Ei", "Ki", "m", "e3", ".e-10"};
    for (std::string_view text : invalid) {
      CAPTURE(text);
      Quantity q;
      std::string why;
      CHECK_FALSE(Quantity::TryParse(text, &q, &why));
      CHECK_FALSE(why.empty());
      CHECK_THROWS_AS((void)Quantity::Parse(text), tfk8s::ValidationError);
    }
  }

  TEST_CASE("parse: errors carry Kubernetes' reasons and the offending text") {
    std::string what = ParseError("1.1.M");
    CHECK(what.find("quantity") != std::string::npos);
    CHECK(what.find("1.1.M") != std::string::npos);
    CHECK(what.find("quantities must match the regular expression") != std::string::npos);
    what = ParseError("0.1mi");
    CHECK(what.find("unable to parse quantity's suffix") != std::string::npos);
    what = ParseError("-3.01e-");
    CHECK(what.find("unable to parse quantity's suffix") != std::string::npos);
    what = ParseError("");
    CHECK(what.find("quantities must match the regular expression") != std::string::npos);

    std::string why;
    Quantity untouched = Quantity::Parse("1.5Gi");
    CHECK_FALSE(Quantity::TryParse("1K", &untouched, &why));
    CHECK(untouched.ToString() == "1536Mi");  // left unchanged on failure
    CHECK(Quantity::TryParse("250m", &untouched));
    CHECK(untouched.ToString() == "250m");
    CHECK(Quantity::TryParse("1Gi", nullptr));  // syntax check only
    CHECK(why == "unable to parse quantity's suffix");
    CHECK_FALSE(Quantity::TryParse("abc", nullptr, nullptr));  // both outputs are optional
  }

  TEST_CASE("parse: zero forms") {
    for (std::string_view text :
         {"0", "-0", "+0", "00", "0.0", "0.", ".0", "-.0", "0e5", "-0Ki", "0.000n", "0.Ei"}) {
      CAPTURE(text);
      const Quantity q = Quantity::Parse(text);
      CHECK(q.IsZero());
      CHECK(q.Sign() == 0);
      CHECK(q.ToString() == "0");
    }
    const Quantity def;
    CHECK(def.IsZero());
    CHECK(def.ToString() == "0");
    CHECK(def.format() == F::kDecimalSI);
    CHECK(Quantity::Parse("0Ki").format() == F::kBinarySI);
  }

  TEST_CASE("format: Kubernetes TestQuantityString alternates canonicalise") {
    const std::vector<std::pair<std::string_view, std::string_view>> cases = {
        {"1024Mi", "1Gi"},
        {"307200Ki", "300Mi"},
        {"1025024Mi", "1001Gi"},
        {"1024Gi", "1Ti"},
        {"5000m", "5"},
        {"0.5", "500m"},
        {"1000M", "1G"},
        {"0.001T", "1G"},
        {"1000u", "1m"},
        {"1.08", "1080m"},
        {"1080000000n", "1080m"},
        {"1000E", "1e21"},
        {"5000E", "5e21"},
        {"1000000E", "1e24"},
        {".001e12", "1e9"},
        {"0.001e0", "1e-3"},
        {"1000e-12", "1e-9"},
        {"00", "0"},
        {"1.5Gi", "1536Mi"},
        {"1000m", "1"},
        {"1000", "1k"},
        {"0.1Ki", "102400m"},
        {"-1.5Gi", "-1536Mi"},
        {"1.5Ki", "1536"},
        {"2048Ki", "2Mi"},
        {"1048576Ki", "1Gi"},
        {"1536Ki", "1536Ki"},
        {"1000k", "1M"},
        {"1000000000", "1G"},
        {"10800e-4", "1080e-3"},
        {"1.0", "1"},
        {"01", "1"},
        {"+1", "1"},
        {"0.000001Ki", "1024u"}};
    for (const auto& [input_text, canonical_text] : cases) {
      const std::string_view input = input_text;  // CAPTURE cannot take a structured binding
      CAPTURE(input);
      CHECK(Quantity::Parse(input).ToString() == canonical_text);
    }
  }

  TEST_CASE("format: canonical strings from TestQuantityString round-trip unchanged") {
    for (std::string_view text :
         {"1Gi",      "300Mi", "6Ki",  "1001Gi", "1Ti", "5",     "500m", "1G",    "1m",
          "80m",      "1080m", "300M", "1T",     "1E",  "1e21",  "5e21", "1e24",  "1234567M",
          "1234567m", "3k",    "1025", "0",      "1e9", "1e-3",  "1e-9", "80e-3", "300e6",
          "1e12",     "1e3",   "3e3",  "1n",     "80n", "1080n", "1u",   "80u",   "1080u"}) {
      CAPTURE(text);
      CHECK(Quantity::Parse(text).ToString() == text);
      CHECK(Quantity::Parse("-" + std::string(text)).ToString() ==
            (text == "0" ? std::string("0") : "-" + std::string(text)));
    }
  }

  TEST_CASE("format: TestQuantityParseEmit, positive and negative") {
    const std::vector<std::pair<std::string_view, std::string_view>> cases = {
        {"1Ki", "1Ki"},           {"1Mi", "1Mi"},
        {"1Gi", "1Gi"},           {"1024Mi", "1Gi"},
        {"1000M", "1G"},          {".001Ki", "1024m"},
        {".000001Ki", "1024u"},   {".000000001Ki", "1024n"},
        {".000000000001Ki", "2n"}};
    for (const auto& [input_text, expected] : cases) {
      const std::string_view input = input_text;  // CAPTURE cannot take a structured binding
      CAPTURE(input);
      CHECK(Quantity::Parse(input).ToString() == expected);
      CHECK(Quantity::Parse("-" + std::string(input)).ToString() == "-" + std::string(expected));
    }
  }

  TEST_CASE("format: values beyond int64 (TestParseQuantity)") {
    const std::vector<std::pair<std::string_view, std::string_view>> cases = {
        {"-999999999999999999", "-999999999999999999"},
        {"999999999999999999.0", "999999999999999999"},
        {"999999999999999999.1", "999999999999999999100m"},
        {"-9999999999999999999", "-9999999999999999999"},
        {"9999999999999999999000m", "9999999999999999999"},
        {"-1E", "-1E"},
        {"1000000000000000000", "1E"},
        {"-1.0E", "-1E"},
        {"1.0000000000000000001E", "1000000000000000000100m"},
        {"-1000000000000000000.1", "-1000000000000000000100m"},
        {"1.000000000000000001E", "1000000000000000001"},
        {"10E", "10E"},
        {"-10000000000000000000", "-10E"},
        {"10000000000000000000000m", "10E"},
        {"10.0000000000000000001E", "10000000000000000000100m"},
        {"-10.000000000000000001E", "-10000000000000000001"},
        {"-9223372036854775809.1", "-9223372036854775809100m"},
        {"9223372036854775806000m", "9223372036854775806"},
        {"-9223372036854775808", "-9223372036854775808"},
        {"9223372036854775807000m", "9223372036854775807"},
        {"9223372036854775808", "9223372036854775808"},
        {"9223372036854775808.1", "9223372036854775808100m"},
    };
    for (const auto& [input_text, canonical_text] : cases) {
      const std::string_view input = input_text;  // CAPTURE cannot take a structured binding
      CAPTURE(input);
      CHECK(Quantity::Parse(input).ToString() == canonical_text);
    }
  }

  TEST_CASE("format: binary SI edge cases") {
    // Between -1024 and 1024 binary SI prints as decimal (TestQuantityString).
    CHECK(Quantity::FromInt(5, F::kBinarySI).ToString() == "5");
    CHECK(Quantity::FromInt(1025, F::kBinarySI).ToString() == "1025");
    CHECK(Quantity::FromInt(1000, F::kBinarySI).ToString() == "1k");
    CHECK(Quantity::FromInt(-1023, F::kBinarySI).ToString() == "-1023");
    CHECK(Quantity::FromInt(-1024, F::kBinarySI).ToString() == "-1Ki");
    // 1Ki - 1023.5 keeps binary format (left operand) but is 0.5: "500m".
    const Quantity half = Quantity::Parse("1Ki") - Quantity::Parse("1023.5");
    CHECK(half.format() == F::kBinarySI);
    CHECK(half.ToString() == "500m");
    // Kubernetes caps parsed binary SI at 2^63-1, even 8Ei = 2^63 (kubernetes#140674).
    CHECK(Quantity::Parse("8Ei").ToString() == "9223372036854775807");
    CHECK(Quantity::Parse("-9Ei").ToString() == "-9223372036854775807");
    CHECK(Quantity::Parse("99999999999999999999999999999999999999999Ei").Value() ==
          std::numeric_limits<std::int64_t>::max());
    // Arithmetic is not capped; "Ei" is the largest suffix.
    CHECK(Quantity::Parse("4Ei").Times(2).ToString() == "8Ei");
    CHECK(Quantity::Parse("1Ei").Times(1024).ToString() == "1024Ei");
  }

  TEST_CASE("construct: FromInt and FromMilli (TestNewSet, TestMilliNewSet)") {
    struct IntCase {
      std::int64_t value;
      F format;
      std::string_view text;
    };
    for (const auto& c : std::vector<IntCase>{{1, F::kDecimalSI, "1"},
                                              {1000, F::kDecimalSI, "1k"},
                                              {1234000, F::kDecimalSI, "1234k"},
                                              {1024, F::kBinarySI, "1Ki"},
                                              {1000000, F::kDecimalExponent, "1e6"},
                                              {1024 * 1024, F::kBinarySI, "1Mi"},
                                              {0, F::kBinarySI, "0"},
                                              {-3, F::kDecimalSI, "-3"}}) {
      CAPTURE(c.value);
      const Quantity q = Quantity::FromInt(c.value, c.format);
      CHECK(q.ToString() == c.text);
      CHECK(q.format() == c.format);
      CHECK(Quantity::Parse(q.ToString()).Value() == c.value);
    }
    for (const auto& [milli_value, text] : std::vector<std::pair<std::int64_t, std::string_view>>{
             {1, "1m"}, {1000, "1"}, {1234000, "1234"}, {500, "500m"}, {-250, "-250m"}}) {
      const std::int64_t milli = milli_value;  // CAPTURE cannot take a structured binding
      CAPTURE(milli);
      const Quantity q = Quantity::FromMilli(milli);
      CHECK(q.ToString() == text);
      CHECK(q == Quantity::Parse(text));
      CHECK(Quantity::Parse(q.ToString()).MilliValue() == milli);
    }
    CHECK(Quantity::FromInt(std::numeric_limits<std::int64_t>::min()).ToString() ==
          "-9223372036854775808");
    CHECK(Quantity::FromInt(4).ToString() == "4");
  }

  TEST_CASE("compare: TestQuantityCmp and cross-format equality") {
    CHECK(Quantity::Parse("0").Compare(Quantity::Parse("0")) == 0);
    CHECK(Quantity::Parse("100m").Compare(Quantity::Parse("50m")) == 1);
    CHECK(Quantity::Parse("50m").Compare(Quantity::Parse("100m")) == -1);
    CHECK(Quantity::Parse("10000T").Compare(Quantity::Parse("100Gi")) == 1);
    CHECK(Quantity::Parse("1.5Gi") == Quantity::Parse("1536Mi"));
    CHECK(Quantity::Parse("1Gi") == Quantity::Parse("1024Mi"));
    CHECK(Quantity::Parse("1e3") == Quantity::Parse("1k"));
    CHECK(Quantity::Parse("0.5") == Quantity::Parse("500m"));
    CHECK(Quantity::Parse("1000m") == Quantity::Parse("1"));
    CHECK(Quantity::Parse("0Ki") == Quantity());
    CHECK(Quantity::Parse("1G") != Quantity::Parse("1Gi"));
    CHECK(Quantity::Parse("1G") < Quantity::Parse("1Gi"));
    CHECK(Quantity::Parse("-1") < Quantity::Parse("1n"));
    CHECK(Quantity::Parse("999m") <= Quantity::Parse("1"));
    CHECK(Quantity::Parse("2") > Quantity::Parse("1999m"));
    CHECK((Quantity::Parse("1") <=> Quantity::Parse("1000m")) == std::strong_ordering::equal);
    // TestQuantityCmpInt64AndDec: 9.01 vs 9.00 and 0.80 vs 0.79.
    CHECK(Quantity::Parse("9.01") > Quantity::Parse("9.00"));
    CHECK(Quantity::Parse("0.8") < Quantity::Parse("1"));
    CHECK(Quantity::Parse("0.8") > Quantity::Parse("0.79"));
    CHECK(Quantity::Parse("9223372036854775807") > Quantity::Parse("0.1"));
  }

  TEST_CASE("arithmetic: TestAdd and the zero-format rule") {
    CHECK(Quantity::Parse("10") + Quantity::Parse("1e1") == Quantity::FromInt(20));
    const Quantity dec_plus_bin = Quantity::FromInt(10) + Quantity::FromInt(1, F::kBinarySI);
    CHECK(dec_plus_bin == Quantity::FromInt(11));
    CHECK(dec_plus_bin.format() == F::kDecimalSI);
    const Quantity bin_plus_dec = Quantity::FromInt(10, F::kBinarySI) + Quantity::FromInt(1);
    CHECK(bin_plus_dec == Quantity::FromInt(11));
    CHECK(bin_plus_dec.format() == F::kBinarySI);
    CHECK(Quantity() + Quantity::FromInt(50) == Quantity::FromInt(50));
    CHECK(Quantity::FromInt(50) + Quantity() == Quantity::FromInt(50));
    CHECK((Quantity() + Quantity()).IsZero());
    // TestQuantityAddZeroPreservesSuffix.
    for (std::string_view text : {"100m", "1Gi"}) {
      CAPTURE(text);
      const Quantity value = Quantity::Parse(text);
      CHECK((value + Quantity::Parse("0")).ToString() == text);
      CHECK((Quantity::Parse("0") + value).ToString() == text);
    }
    Quantity total;
    for (std::string_view text : {"500m", "1.5", "250m", "1e-3"}) total += Quantity::Parse(text);
    CHECK(total.ToString() == "2251m");
    Quantity memory = Quantity::Parse("1Gi");
    memory += Quantity::Parse("512Mi");
    CHECK(memory.ToString() == "1536Mi");
    memory += Quantity::Parse("1");  // no longer a multiple of 1Ki
    CHECK(memory.ToString() == "1610612737");
  }

  TEST_CASE("arithmetic: TestSub and the zero-format rule") {
    CHECK((Quantity::FromInt(10) - Quantity::Parse("1e1")).IsZero());
    const Quantity dec_minus_bin = Quantity::FromInt(10) - Quantity::FromInt(1, F::kBinarySI);
    CHECK(dec_minus_bin == Quantity::FromInt(9));
    CHECK(dec_minus_bin.format() == F::kDecimalSI);
    const Quantity bin_minus_dec = Quantity::FromInt(10, F::kBinarySI) - Quantity::FromInt(1);
    CHECK(bin_minus_dec == Quantity::FromInt(9));
    CHECK(bin_minus_dec.format() == F::kBinarySI);
    CHECK(Quantity() - Quantity::FromInt(50) == Quantity::FromInt(-50));
    CHECK(Quantity::FromInt(50) - Quantity() == Quantity::FromInt(50));
    // TestQuantitySubZeroPreservesSuffix.
    CHECK((Quantity::Parse("100m") - Quantity::Parse("0")).ToString() == "100m");
    CHECK((Quantity::Parse("0") - Quantity::Parse("100m")).ToString() == "-100m");
    CHECK((Quantity::Parse("1Gi") - Quantity::Parse("0")).ToString() == "1Gi");
    CHECK((Quantity::Parse("0") - Quantity::Parse("1Gi")).ToString() == "-1Gi");
    // TestNegAndSubAtMostNegative: 1 - (-2^63) = 2^63 + 1, 10 - (-2^63) = 2^63 + 10.
    const Quantity most_negative = Quantity::FromInt(std::numeric_limits<std::int64_t>::min());
    CHECK((Quantity::FromInt(1) - most_negative).ToString() == "9223372036854775809");
    CHECK((Quantity::FromInt(10) - most_negative).ToString() == "9223372036854775818");
    CHECK((Quantity() - most_negative).ToString() == "9223372036854775808");
    CHECK((Quantity::Parse("1m") - Quantity::Parse("-9223372036854775808m")).ToString() ==
          "9223372036854775809m");
    // TestQuantityNeg.
    CHECK((Quantity() - Quantity::Parse("9.01")).ToString() == "-9010m");
    Quantity q = Quantity::Parse("2Gi");
    q -= Quantity::Parse("512Mi");
    CHECK(q.ToString() == "1536Mi");
  }

  TEST_CASE("arithmetic: Times (TestMul)") {
    CHECK(Quantity::FromInt(10).Times(10) == Quantity::FromInt(100));
    CHECK(Quantity::FromInt(10).Times(1) == Quantity::FromInt(10));
    CHECK(Quantity::FromInt(10, F::kBinarySI).Times(1).format() == F::kBinarySI);
    CHECK(Quantity().Times(50).IsZero());
    CHECK(Quantity::FromInt(50).Times(0).IsZero());
    CHECK(Quantity::FromInt(10).Times(-10) == Quantity::FromInt(-100));
    CHECK(Quantity::FromInt(-50).Times(-50) == Quantity::FromInt(2500));
    constexpr std::int64_t kMostPositive = std::numeric_limits<std::int64_t>::max();
    constexpr std::int64_t kMostNegative = std::numeric_limits<std::int64_t>::min();
    CHECK(Quantity::FromInt(kMostPositive).Times(2).ToString() == "18446744073709551614");
    CHECK(Quantity::FromInt(kMostPositive).Times(10).ToString() == "92233720368547758070");
    CHECK(Quantity::FromInt(kMostPositive).Times(-1) == Quantity::FromInt(-kMostPositive));
    CHECK(Quantity::FromInt(kMostNegative).Times(-1).ToString() == "9223372036854775808");
    CHECK(Quantity::FromInt(kMostNegative).Times(2).ToString() == "-18446744073709551616");
    CHECK(Quantity::FromInt(kMostNegative).Times(-10).ToString() == "92233720368547758080");
    CHECK(Quantity::FromInt(kMostNegative / 2).Times(2) == Quantity::FromInt(kMostNegative));
    // Per-replica request times replicas.
    CHECK(Quantity::Parse("250m").Times(6).ToString() == "1500m");
    CHECK(Quantity::Parse("1.5Gi").Times(4).ToString() == "6Gi");
  }

  TEST_CASE("Value and MilliValue round away from zero and saturate") {
    CHECK(Quantity::Parse("1Mi").Value() == 1024 * 1024);
    CHECK(Quantity::Parse("9.01").Value() == 10);  // TestQuantityRoundUp, scale 0
    CHECK(Quantity::Parse("-9.01").Value() == -10);
    CHECK(Quantity::Parse("9").Value() == 9);
    CHECK(Quantity::Parse("1n").Value() == 1);
    CHECK(Quantity::Parse("-1n").Value() == -1);
    CHECK(Quantity::Parse("0").Value() == 0);
    CHECK(Quantity::Parse("100m").MilliValue() == 100);
    CHECK(Quantity::Parse("1.0001").MilliValue() == 1001);
    CHECK(Quantity::Parse("-1.0001").MilliValue() == -1001);
    CHECK(Quantity::Parse("100u").MilliValue() == 1);
    CHECK(Quantity::Parse("2").MilliValue() == 2000);
    CHECK(Quantity::Parse("1.5Gi").Value() == 1610612736);
    // TestScaledValue: 1n, 1u, 1m, 1 at milli and unit scale.
    CHECK(Quantity::Parse("1n").MilliValue() == 1);
    CHECK(Quantity::Parse("1u").MilliValue() == 1);
    CHECK(Quantity::Parse("1m").MilliValue() == 1);
    CHECK(Quantity::Parse("1m").Value() == 1);
    CHECK(Quantity::Parse("1").MilliValue() == 1000);
    // Saturation instead of Go's silent overflow.
    constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
    constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
    CHECK(Quantity::Parse("9223372036854775807").Value() == kMax);
    CHECK(Quantity::Parse("9223372036854775808").Value() == kMax);
    CHECK(Quantity::Parse("1e20").Value() == kMax);
    CHECK(Quantity::Parse("-1e20").Value() == kMin);
    CHECK(Quantity::Parse("-9223372036854775808").Value() == kMin);
    CHECK(Quantity::Parse("1e17").MilliValue() == kMax);
    CHECK(Quantity::Parse("-1e17").MilliValue() == kMin);
  }

  TEST_CASE("AsDouble (TestStringQuantityAsApproximateFloat64)") {
    CHECK(Quantity::Parse("2Ki").AsDouble() == 2048.0);
    CHECK(Quantity::Parse("1.1Ki").AsDouble() == 1126.4);
    CHECK(Quantity::Parse("1Mi").AsDouble() == 1.048576e+06);
    CHECK(Quantity::Parse("2Gi").AsDouble() == 2.147483648e+09);
    CHECK(Quantity::Parse("12E").AsDouble() == 1.2e19);
    CHECK(Quantity::Parse("9223372036854775807").AsDouble() == 9223372036854775807.0);
    CHECK(Quantity::Parse("0").AsDouble() == 0.0);
    CHECK(Quantity::Parse("500m").AsDouble() == 0.5);
    CHECK(Quantity::Parse("-1.5").AsDouble() == -1.5);
    CHECK(Quantity::Parse("7340032e-1").AsDouble() == doctest::Approx(734003.2));
  }

  TEST_CASE("range: values of 10^29 and beyond are rejected, not wrapped") {
    // Largest accepted magnitude: 29 nines (just below 10^29), exact to 1n.
    const Quantity big = Quantity::Parse("99999999999999999999999999999.999999999");
    CHECK(big.ToString() == "99999999999999999999999999999999999999n");
    CHECK(Quantity::Parse("1e28").ToString() == "10e27");
    CHECK(Quantity::Parse("-1e28").ToString() == "-10e27");
    CHECK(Quantity::Parse("10000000E").ToString() == "10e24");
    for (std::string_view text : {"1e29", "-1e29", "100000000000000000000000000000",
                                  "99999999999999999999999999999.9999999991", "1e1000",
                                  "100000000000E", "1e9223372036854775807"}) {
      CAPTURE(text);
      const std::string what = ParseError(text);
      CHECK(what.find("out of range") != std::string::npos);
    }
    // Tiny values round up to 1n instead of failing; zero stays zero.
    CHECK(Quantity::Parse("1e-1000").ToString() == "1e-9");
    CHECK(Quantity::Parse("1e-9223372036854775808").ToString() == "1e-9");
    CHECK(Quantity::Parse("0e9223372036854775807").IsZero());
    // Arithmetic overflow throws ValidationError and leaves the operand unchanged.
    Quantity sum = Quantity::Parse("6e28");
    CHECK_THROWS_AS(sum += Quantity::Parse("5e28"), tfk8s::ValidationError);
    CHECK(sum.ToString() == "60e27");
    CHECK_THROWS_AS(sum -= Quantity::Parse("-5e28"), tfk8s::ValidationError);
    CHECK_THROWS_AS((void)Quantity::Parse("1e28").Times(10), tfk8s::ValidationError);
    CHECK_THROWS_AS((void)Quantity::Parse("1e28").Times(std::numeric_limits<std::int64_t>::min()),
                    tfk8s::ValidationError);
    CHECK(Quantity::Parse("1e27").Times(99).ToString() == "99e27");
    try {
      (void)Quantity::Parse("2e28").Times(5);
      FAIL("expected overflow");
    } catch (const tfk8s::ValidationError& e) {
      CHECK(e.field() == "quantity");
      CHECK(e.value() == "20e27 * 5");
    }
  }

  TEST_CASE("round trip: Parse(ToString()) is exact and ToString() is idempotent") {
    for (const auto& c : kParseCases) {
      CAPTURE(c.input);
      for (const std::string& text : {std::string(c.input), "-" + std::string(c.input)}) {
        const Quantity q = Quantity::Parse(text);
        const Quantity again = Quantity::Parse(q.ToString());
        CHECK(again == q);
        CHECK(again.ToString() == q.ToString());
      }
    }
  }

  // The vectors of tests/python/test_html.py (tfk8s._units): the C++ tables and the Python views
  // show the same numbers (the views add the word "cores").
  TEST_CASE("for people: cores, binary bytes, and amounts by resource name") {
    using tfk8s::FormatAmount;
    using tfk8s::FormatBytes;
    using tfk8s::FormatCores;
    const std::vector<std::pair<std::string_view, std::string_view>> cores = {
        {"31500m", "31.5"}, {"2", "2"},         {"1", "1"},       {"250m", "0.25"},
        {"1000m", "1"},     {"0", "0"},         {"100", "100"},   {"12345m", "12.3"},
        {"1m", "0"},        {"-1500m", "-1.5"}, {"99950m", "100"}};
    for (const auto& [text, shown] : cores) {
      CAPTURE(text);
      CHECK(FormatCores(Quantity::Parse(text)) == shown);
    }
    const std::vector<std::pair<std::string_view, std::string_view>> bytes = {
        {"128Gi", "128 GiB"}, {"1536Mi", "1.5 GiB"},  {"134217728Ki", "128 GiB"},
        {"512", "512 B"},     {"2e9", "1.86 GiB"},    {"64M", "61 MiB"},
        {"1Ti", "1 TiB"},     {"0", "0 B"},           {"-1Gi", "-1 GiB"},
        {"8Ki", "8 KiB"},     {"65.8Gi", "65.8 GiB"}, {"2048Ti", "2048 TiB"}};
    for (const auto& [text, shown] : bytes) {
      CAPTURE(text);
      CHECK(FormatBytes(Quantity::Parse(text)) == shown);
    }
    const std::vector<std::array<std::string_view, 3>> amounts = {
        {"cpu", "31500m", "31.5"},
        {"requests.cpu", "500m", "0.5"},
        {"limits.cpu", "4", "4"},
        {"memory", "8Gi", "8 GiB"},
        {"requests.memory", "1073741824", "1 GiB"},
        {"ephemeral-storage", "500Gi", "500 GiB"},
        {"requests.storage", "1Ti", "1 TiB"},
        {"fast.storageclass.storage.k8s.io/requests.storage", "10Gi", "10 GiB"},
        {"requests.nvidia.com/gpu", "4", "4"},
        {"nvidia.com/gpu", "1k", "1000"},
        {"pods", "110", "110"},
        {"count/jobs.batch", "3", "3"},
        {"pods", "1500m", "1500m"},
        {"requests.cpu.example.com/cpu", "2", "2"},
    };
    for (const auto& [resource, text, shown] : amounts) {
      CAPTURE(resource);
      CAPTURE(text);
      CHECK(FormatAmount(resource, Quantity::Parse(text)) == shown);
    }
  }
}
