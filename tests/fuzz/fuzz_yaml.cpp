// Harness: the YAML reader (FromYaml / FromYamlDocuments, src/yaml.cpp) on arbitrary bytes.
// Properties: only tfk8s errors escape; every document that parses survives ToYaml -> FromYaml
// unchanged (what `tfk8s` writes back must read the same).

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.hpp"
#include "tfk8s/yaml.hpp"

namespace {

bool HasNonFinite(const nlohmann::json& j) {
  if (j.is_number_float()) {
    double d = j.get<double>();
    return !(d == d) || d > 1.7976931348623157e308 || d < -1.7976931348623157e308;
  }
  if (j.is_structured()) {
    for (const auto& v : j) {
      if (HasNonFinite(v)) return true;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tfk8s::fuzz;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<nlohmann::json> docs;
  if (!Guarded("FromYamlDocuments", [&] { docs = tfk8s::FromYamlDocuments(text); })) return 0;
  Guarded("FromYaml", [&] { (void)tfk8s::FromYaml(text); });
  for (const auto& doc : docs) {
    if (HasNonFinite(doc)) continue;  // JSON has no NaN/Inf; nothing to round-trip
    std::string yaml;
    Check(Guarded("ToYaml", [&] { yaml = tfk8s::ToYaml(doc); }), "ToYaml threw", Dump(doc));
    nlohmann::json back;
    Check(Guarded("FromYaml(ToYaml(doc))", [&] { back = tfk8s::FromYaml(yaml); }),
          "FromYaml(ToYaml(doc)) threw", yaml);
    // An empty document reads back as {} (FromYaml's rule); null is the only such value.
    if (doc.is_null()) continue;
    Check(back == doc, "FromYaml(ToYaml(doc)) != doc",
          Dump(doc) + "\n--- yaml:\n" + yaml + "--- back:\n" + Dump(back));
  }
  return 0;
}
