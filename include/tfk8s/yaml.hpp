#pragma once
/// @file
/// YAML conversion of API objects (for `kubectl apply -f`, notebooks and config files).

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tfk8s {

/// One object as a YAML document (block style, keys in the object's order).
std::string ToYaml(const nlohmann::json& object);
/// Several objects as a multi-document YAML stream ("---" separated), as `kubectl apply -f`
/// accepts it.
std::string ToYamlDocuments(const std::vector<nlohmann::json>& objects);
/// Parses one YAML document to JSON (scalars that look like numbers or booleans become numbers
/// and booleans, as Kubernetes' YAML decoding does). Throws ValidationError (field "yaml").
nlohmann::json FromYaml(std::string_view text);
/// Parses every document of a YAML stream; empty documents are skipped.
std::vector<nlohmann::json> FromYamlDocuments(std::string_view text);

}  // namespace tfk8s
