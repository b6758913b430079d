#pragma once
/// @file
/// A result struct's fields declared once. A list macro names each field's type, member name,
/// JSON key and default; TFK8S_FIELDS(LIST) inside the struct declares the members and a
/// visitor over them, and FieldsToJson() turns any such struct into JSON. Adding a field to a
/// status is then one line in its list plus the code that fills it: the JSON the Python
/// bindings return follows by itself. Example:
///
///     #define TFK8S_POINT_FIELDS(X) X(int, x, "x", = 0) X(std::string, label, "label", )
///     struct Point {
///       TFK8S_FIELDS(TFK8S_POINT_FIELDS)
///     };
///     // FieldsToJson(Point{1, "a"}) == {"x": 1, "label": "a"}
///
/// A list spans lines with backslashes, one field a line; a field's comment goes in /* */ after
/// it (a // comment would swallow the continuation).
/// Field values become JSON by type: bool, numbers and strings as they are; an enum by its
/// ToString(); a struct by its ToJson() or, declared with TFK8S_FIELDS, by its fields; a time
/// point as seconds since the epoch, a duration in seconds; an optional as null when empty; a
/// vector as an array.

#include <chrono>
#include <optional>
#include <ratio>
#include <string>
#include <type_traits>
#include <vector>

#include "tfk8s/client.hpp"

namespace tfk8s {

/// Declares one member (used by TFK8S_FIELDS).
#define TFK8S_FIELD_MEMBER(type, name, key, init) type name init;
/// Visits one member as (key, value) (used by TFK8S_FIELDS).
#define TFK8S_FIELD_VISIT(type, name, key, init) visit(key, name);

/// The members of the list LIST, and VisitFields(visit) calling visit(key, value) for each.
#define TFK8S_FIELDS(LIST)                      \
  LIST(TFK8S_FIELD_MEMBER)                      \
  static constexpr bool kDeclaresFields = true; \
  template <class Visit>                        \
  void VisitFields(Visit&& visit) const {       \
    LIST(TFK8S_FIELD_VISIT)                     \
  }

template <class S>
Json FieldsToJson(const S& s);
template <class S>
Json FieldsToKubernetesJson(const S& s);
/// A time as Kubernetes writes it: RFC 3339 in UTC, whole seconds ("2024-05-01T10:00:00Z").
std::string FormatRfc3339(std::chrono::system_clock::time_point t);

namespace internal {

/// "not_ready" -> "notReady"; a key that is not a snake_case identifier ([a-z0-9_]) as it is.
std::string LowerCamelCase(const std::string& key);
/// `value` with every object key in LowerCamelCase, recursively.
Json CamelCaseKeys(const Json& value);

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <class T>
struct IsVector : std::false_type {};
template <class T, class A>
struct IsVector<std::vector<T, A>> : std::true_type {};
template <class T>
struct IsDuration : std::false_type {};
template <class R, class P>
struct IsDuration<std::chrono::duration<R, P>> : std::true_type {};

/// One field's value as JSON (see the file comment for the rules).
template <class T>
Json FieldJson(const T& value) {
  if constexpr (requires { value.ToJson(); }) {
    return value.ToJson();
  } else if constexpr (requires { T::kDeclaresFields; }) {
    return FieldsToJson(value);
  } else if constexpr (std::is_enum_v<T>) {
    return ToString(value);
  } else if constexpr (std::is_same_v<T, std::chrono::system_clock::time_point>) {
    return std::chrono::duration<double>(value.time_since_epoch()).count();
  } else if constexpr (IsDuration<T>::value) {
    if constexpr (std::is_same_v<typename T::period, std::ratio<1>>) {
      return value.count();
    } else {
      return std::chrono::duration<double>(value).count();
    }
  } else if constexpr (IsOptional<T>::value) {
    return value ? FieldJson(*value) : Json(nullptr);
  } else if constexpr (IsVector<T>::value) {
    Json out = Json::array();
    for (const typename T::value_type& v : value) out.push_back(FieldJson(v));
    return out;
  } else {
    return Json(value);
  }
}

/// One field's value as a Kubernetes object's status has it: FieldJson's, but a struct by its
/// fields (FieldsToKubernetesJson) rather than its ToJson (whose extras, e.g. a text table, are
/// for the bindings), keys in lowerCamelCase, and a time point as an RFC 3339 string.
template <class T>
Json KubernetesFieldJson(const T& value) {
  if constexpr (requires { T::kDeclaresFields; }) {
    return FieldsToKubernetesJson(value);
  } else if constexpr (requires { value.ToJson(); }) {
    return CamelCaseKeys(value.ToJson());
  } else if constexpr (std::is_same_v<T, std::chrono::system_clock::time_point>) {
    return FormatRfc3339(value);
  } else if constexpr (IsOptional<T>::value) {
    return value ? KubernetesFieldJson(*value) : Json(nullptr);
  } else if constexpr (IsVector<T>::value) {
    Json out = Json::array();
    for (const typename T::value_type& v : value) out.push_back(KubernetesFieldJson(v));
    return out;
  } else {
    return FieldJson(value);
  }
}

}  // namespace internal

/// Every field of a struct declared with TFK8S_FIELDS as a Kubernetes object's status writes
/// it (what `tfk8s get -o yaml` prints under `status`): keys in lowerCamelCase ("ready_tools"
/// -> "readyTools"), times as RFC 3339 strings in UTC, nested structs likewise, an empty
/// optional as null; only the declared fields.
template <class S>
Json FieldsToKubernetesJson(const S& s) {
  Json out = Json::object();
  s.VisitFields([&out](const char* key, const auto& value) {
    out[internal::LowerCamelCase(key)] = internal::KubernetesFieldJson(value);
  });
  return out;
}

/// Every field of a struct declared with TFK8S_FIELDS, as a JSON object keyed by the list's keys.
template <class S>
Json FieldsToJson(const S& s) {
  Json out = Json::object();
  s.VisitFields(
      [&out](const char* key, const auto& value) { out[key] = internal::FieldJson(value); });
  return out;
}

}  // namespace tfk8s
