#pragma once
// The message of the ValidationError a call throws, for checks on what it names.

#include <doctest/doctest.h>

#include <functional>
#include <string>

#include "tfk8s/error.hpp"

namespace tfk8s::testing {

/// what() of the ValidationError `f` throws; fails the test case when it throws none.
inline std::string ValidationMessage(const std::function<void()>& f) {
  try {
    f();
  } catch (const ValidationError& e) {
    return e.what();
  }
  FAIL("no ValidationError");
  return {};
}

}  // namespace tfk8s::testing
