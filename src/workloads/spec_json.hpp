#pragma once
// Reading workload specs from JSON (the spec's own camelCase keys): one place where nlohmann's
// exceptions become ValidationErrors naming the field (design rule 4).

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "tfk8s/client.hpp"
#include "tfk8s/error.hpp"

namespace tfk8s::internal {

/// `j[key]` as T; `fallback` when j is not an object, the key is absent or null. A value of the
/// wrong type throws ValidationError(path + key, the value, "has the wrong type").
template <typename T>
T Field(const Json& j, const char* key, const std::string& path, T fallback) {
  if (!j.is_object()) return fallback;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // nlohmann converts any number (1.5, 1e300) with a cast, which is undefined behaviour out
    // of range: an integer field takes whole numbers that fit only.
    bool fits = false;
    if (it->is_number_integer() && !it->is_number_unsigned()) {
      auto v = it->get<std::int64_t>();
      fits =
          v >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
          (std::is_unsigned_v<T> || v <= static_cast<std::int64_t>(std::numeric_limits<T>::max()));
    } else if (it->is_number_unsigned()) {
      fits = it->get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<T>::max());
    }
    if (!fits) {
      throw ValidationError(
          path + key, it->dump(),
          it->is_number() ? "must be a whole number in range" : "has the wrong type");
    }
    return it->get<T>();
  }
  try {
    return it->get<T>();
  } catch (const Json::exception&) {
    throw ValidationError(path + key, it->dump(), "has the wrong type");
  }
}

/// Refuses what a spec does not understand: the members of `input` (a spec document) that the
/// spec read from it does not give back (`understood`: Spec::FromJson(input).ToJson()), at their
/// paths ("worker.replica", "sesion"). A ValidationError naming the first (the others in its
/// reason), "is not a field of `kind`": a misspelt key must not fall back to a default in
/// silence. Members with nothing in them (null, "", false, 0, [], {}) say nothing and pass.
void RefuseUnknownFields(const Json& input, const Json& understood, std::string_view kind);

/// Field() for optional values: nullopt when absent or null.
template <typename T>
std::optional<T> OptionalField(const Json& j, const char* key, const std::string& path) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return Field<T>(j, key, path, T{});
}

/// OptionalField() that keeps `fallback` when the key is absent or null.
template <typename T>
std::optional<T> OptionalField(const Json& j, const char* key, const std::string& path,
                               std::optional<T> fallback) {
  std::optional<T> value = OptionalField<T>(j, key, path);
  return value ? value : fallback;
}

}  // namespace tfk8s::internal
