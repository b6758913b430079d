#include "workloads/spec_json.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

namespace tfk8s::internal {

namespace {

bool SaysNothing(const Json& v) {
  if (v.is_null()) return true;
  if (v.is_string()) return v.get_ref<const std::string&>().empty();
  if (v.is_boolean()) return !v.get<bool>();
  if (v.is_number()) return v == 0;
  if (v.is_array() || v.is_object()) return v.empty();
  return false;
}

void CollectUnknown(const Json& input, const Json& known, const std::string& path,
                    std::vector<std::string>* out) {
  if (input.is_object()) {
    for (const auto& [key, value] : input.items()) {
      std::string here = path;
      if (!here.empty()) here += '.';
      here += key;
      if (!known.is_object() || !known.contains(key)) {
        if (!SaysNothing(value)) out->push_back(here);
        continue;
      }
      CollectUnknown(value, known[key], here, out);
    }
  } else if (input.is_array() && known.is_array()) {
    for (std::size_t i = 0; i < input.size() && i < known.size(); ++i) {
      CollectUnknown(input[i], known[i], path + "[" + std::to_string(i) + "]", out);
    }
  }
}

}  // namespace

void RefuseUnknownFields(const Json& input, const Json& understood, std::string_view kind) {
  std::vector<std::string> unknown;
  CollectUnknown(input, understood, "", &unknown);
  if (unknown.empty()) return;
  std::string reason = fmt::format("is not a field of {}", kind);
  if (unknown.size() > 1) {
    reason += fmt::format(
        " (nor {})", fmt::join(std::vector<std::string>(unknown.begin() + 1, unknown.end()), ", "));
  }
  throw ValidationError(unknown.front(), "", reason);
}

}  // namespace tfk8s::internal
