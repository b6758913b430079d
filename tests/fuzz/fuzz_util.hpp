#pragma once
// Shared by the libFuzzer harnesses (tests/fuzz/*.cpp): the properties every parser of untrusted
// input must keep, whatever the bytes.
//
//  - It throws nothing but tfk8s's own errors (tfk8s::Error and its subclasses). Anything else
//    (nlohmann::json::exception, YAML::Exception, std::out_of_range, …) escaping is a bug: the
//    harness prints it and aborts, which libFuzzer reports as a crash with a reproducer.
//  - Memory safety and undefined behaviour are checked by ASan + UBSan (the `fuzz` preset).

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tfk8s/error.hpp"

namespace tfk8s::fuzz {

/// Aborts with a message; libFuzzer saves the input as a crash reproducer.
[[noreturn]] inline void Fail(std::string_view what, std::string_view detail = {}) {
  std::fprintf(stderr, "FUZZ PROPERTY VIOLATED: %.*s\n%.*s\n", static_cast<int>(what.size()),
               what.data(), static_cast<int>(detail.size()), detail.data());
  std::abort();
}

/// Checks a condition that must hold for every input.
inline void Check(bool ok, std::string_view what, std::string_view detail = {}) {
  if (!ok) Fail(what, detail);
}

/// Runs `f`; returns true when it returned, false when it threw a tfk8s::Error. Any other
/// exception is a property violation.
template <typename F>
bool Guarded(std::string_view what, F&& f) {
  try {
    f();
    return true;
  } catch (const tfk8s::Error&) {
    return false;
  } catch (const std::exception& e) {
    Fail(std::string(what) + " threw a non-tfk8s exception", e.what());
  } catch (...) {
    Fail(std::string(what) + " threw a non-std exception");
  }
}

/// The input as JSON, or a discarded value when it is not JSON (the harness then stops: the
/// JSON parser itself is nlohmann's, not ours).
inline nlohmann::json ParseJsonInput(const std::uint8_t* data, std::size_t size) {
  return nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
}

/// Serialises for a failure message.
inline std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tfk8s::fuzz
