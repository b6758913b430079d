// Harness: the label selector parser of the `tfk8s` command (ParseLabelSelector,
// tools/cli/cli_core.cpp), which reads `-l` the way Kubernetes' labels.Parse does.
// Properties: it throws only ValidationError; a parsed selector formats to canonical text that
// parses back to the same requirements (and formats to itself); every key is a qualified name
// and every value a label value; set values are sorted and distinct; matching never throws and
// agrees with each requirement's meaning on label sets built from the selector itself.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "cli_core.hpp"
#include "fuzz_util.hpp"
#include "tfk8s/error.hpp"
#include "tfk8s/validation.hpp"

namespace {

using tfk8s::cli::LabelRequirement;
using Op = LabelRequirement::Op;

bool Same(const std::vector<LabelRequirement>& a, const std::vector<LabelRequirement>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].key != b[i].key || a[i].op != b[i].op || a[i].values != b[i].values) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tfk8s::fuzz;
  using tfk8s::cli::FormatLabelSelector;
  using tfk8s::cli::MatchesSelector;
  using tfk8s::cli::ParseLabelSelector;
  std::string text(reinterpret_cast<const char*>(data), size);

  std::vector<LabelRequirement> selector;
  try {
    selector = ParseLabelSelector(text);
  } catch (const tfk8s::ValidationError&) {
    return 0;
  } catch (const std::exception& e) {
    Fail("ParseLabelSelector threw something else than ValidationError", text + ": " + e.what());
  }

  for (const LabelRequirement& r : selector) {
    Check(tfk8s::validation::IsQualifiedName(r.key).empty(), "a key is no qualified name",
          text + " -> " + r.key);
    for (const auto& v : r.values) {
      Check(tfk8s::validation::IsValidLabelValue(v).empty(), "a value is no label value",
            text + " -> " + v);
    }
    bool set = r.op == Op::kIn || r.op == Op::kNotIn;
    bool none = r.op == Op::kExists || r.op == Op::kNotExists;
    Check(none  ? r.values.empty()
          : set ? !r.values.empty()
                : r.values.size() == 1,
          "the number of values does not fit the operator", text);
    for (std::size_t i = 1; i < r.values.size(); ++i) {
      Check(r.values[i - 1] < r.values[i], "set values are not sorted and distinct", text);
    }
  }

  std::string canonical;
  Check(Guarded("FormatLabelSelector", [&] { canonical = FormatLabelSelector(selector); }),
        "FormatLabelSelector threw", text);
  std::vector<LabelRequirement> again;
  Check(Guarded("ParseLabelSelector(canonical)", [&] { again = ParseLabelSelector(canonical); }),
        "the canonical text does not parse", text + " -> " + canonical);
  Check(Same(again, selector), "the canonical text parses to other requirements",
        text + " -> " + canonical);
  Check(FormatLabelSelector(again) == canonical, "formatting is not a fixed point",
        text + " -> " + canonical);

  // Each requirement alone, on labels that hold its key with its first value, and on none.
  for (const LabelRequirement& r : selector) {
    const std::vector<LabelRequirement> one = {r};
    bool with_value = false;
    bool without = false;
    std::map<std::string, std::string> labels;
    if (!r.values.empty()) labels[r.key] = r.values.front();
    Check(Guarded("MatchesSelector",
                  [&] {
                    with_value = MatchesSelector(one, labels);
                    without = MatchesSelector(one, {});
                  }),
          "MatchesSelector threw", text);
    switch (r.op) {
      case Op::kEquals:
      case Op::kIn:
        Check(with_value && !without, "= / in disagrees with its own value", text);
        break;
      case Op::kNotEquals:
      case Op::kNotIn:
        Check(!with_value && without, "!= / notin disagrees with its own value", text);
        break;
      case Op::kExists:
        Check(!MatchesSelector(one, {}) && MatchesSelector(one, {{r.key, ""}}), "exists disagrees",
              text);
        break;
      case Op::kNotExists:
        Check(MatchesSelector(one, {}) && !MatchesSelector(one, {{r.key, ""}}), "!exists disagrees",
              text);
        break;
      case Op::kGreaterThan:
      case Op::kLessThan:
        // A number is neither greater nor less than itself; an absent key matches neither.
        Check(!with_value && !without, "> / < matches its own value or a missing key", text);
        break;
    }
  }
  // The whole selector: the conjunction of its requirements on any label set met here.
  std::map<std::string, std::string> all;
  for (const LabelRequirement& r : selector) {
    if (!r.values.empty()) all[r.key] = r.values.front();
  }
  bool each = true;
  for (const LabelRequirement& r : selector) each = each && MatchesSelector({r}, all);
  Check(MatchesSelector(selector, all) == each, "a selector is not the AND of its requirements",
        text);
  return 0;
}
