#pragma once
// Helpers shared by the config-layer unit tests (kubeconfig, credentials, in-cluster):
// catching a ConfigError, scoped environment variables and scratch directories.

#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>

#include "tfk8s/error.hpp"

namespace tfk8s::testing {

/// The ConfigError `fn` throws (fails the test when it throws nothing or something else).
inline std::optional<ConfigError> CatchConfigError(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const ConfigError& e) {
    return e;
  } catch (const std::exception& e) {
    FAIL_CHECK("expected ConfigError, got: " << e.what());
    return std::nullopt;
  }
  FAIL_CHECK("expected ConfigError, nothing was thrown");
  return std::nullopt;
}

/// Sets (or unsets, with nullopt) an environment variable for one scope.
/// Tests change the environment only while no other thread runs, hence the NOLINTs.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* old = ::getenv(name_.c_str())) {  // NOLINT(concurrency-mt-unsafe)
      old_ = old;
    }
    if (value) {
      ::setenv(name_.c_str(), value->c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    } else {
      ::unsetenv(name_.c_str());  // NOLINT(concurrency-mt-unsafe)
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_.c_str(), old_->c_str(), 1);  // NOLINT(concurrency-mt-unsafe)
    } else {
      ::unsetenv(name_.c_str());  // NOLINT(concurrency-mt-unsafe)
    }
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

/// A fresh directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/tfk8s-test-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    path_ = pattern;
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string File(const std::string& name) const { return path_ + "/" + name; }
  /// Writes (replacing) a file, creating its folders; returns its path.
  std::string Write(const std::string& name, const std::string& content) const {
    std::string file = File(name);
    std::filesystem::create_directories(std::filesystem::path(file).parent_path());
    std::ofstream(file, std::ios::binary | std::ios::trunc) << content;
    return file;
  }
  /// Writes an executable /bin/sh script.
  std::string Script(const std::string& name, const std::string& body) const {
    std::string file = Write(name, "#!/bin/sh\n" + body);
    ::chmod(file.c_str(), 0755);
    return file;
  }
  [[nodiscard]] std::string Read(const std::string& name) const {
    std::ifstream in(File(name), std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  /// Lines in a file (e.g. how many times a plugin ran); 0 when it does not exist.
  [[nodiscard]] int Lines(const std::string& name) const {
    const std::string text = Read(name);
    return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  }
  void Remove(const std::string& name) const { std::filesystem::remove(File(name)); }

 private:
  std::string path_;
};

}  // namespace tfk8s::testing
