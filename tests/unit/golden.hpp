#pragma once
// Golden-file comparison: the expected JSON lives in tests/data/golden/<name>.json.
// Set TFK8S_UPDATE_GOLDEN=1 to (re)write the files, then review the diff before committing.

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/base64.hpp"

namespace tfk8s::testing {

inline void CheckGolden(const std::string& name, const nlohmann::json& actual) {
  std::string path = std::string(TFK8S_TEST_DATA_DIR) + "/golden/" + name + ".json";
  const char* update = std::getenv("TFK8S_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(path) << actual.dump(2) << "\n";
    MESSAGE("updated " << path);
    return;
  }
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "missing golden file " << path << " (run with TFK8S_UPDATE_GOLDEN=1)");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json expected = nlohmann::json::parse(ss.str());
  if (expected != actual) {
    // Show the first differing paths, not two whole documents.
    auto patch = nlohmann::json::diff(expected, actual);
    std::string shown =
        patch.size() > 10
            ? nlohmann::json(std::vector<nlohmann::json>(patch.begin(), patch.begin() + 10)).dump(1)
            : patch.dump(1);
    FAIL_CHECK("rendering differs from " << path << ": " << shown);
  }
}

/// The built launcher (src/launcher/tfk8s_launcher.c; the library embeds these bytes), base64
/// as a ConfigMap's binaryData holds it.
inline std::string LauncherFileBase64() {
  std::ifstream in(TFK8S_LAUNCHER_FILE, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot read " << TFK8S_LAUNCHER_FILE);
  std::stringstream ss;
  ss << in.rdbuf();
  return internal::Base64Encode(ss.str());
}

/// A TFCluster's rendering with the root ConfigMap's copy of the launcher replaced by a marker,
/// after checking it is the built binary: golden files record where the launcher goes, its own
/// tests (tests/python/test_launcher.py) what it does.
inline std::vector<nlohmann::json> WithLauncherMarker(std::vector<nlohmann::json> objects) {
  for (auto& o : objects) {
    if (o["kind"] != "ConfigMap" || !o.contains("binaryData") ||
        !o["binaryData"].contains("tfk8s-launcher")) {
      continue;
    }
    CHECK(o["binaryData"]["tfk8s-launcher"] == LauncherFileBase64());
    o["binaryData"]["tfk8s-launcher"] = "<base64 of src/launcher/tfk8s_launcher.c, built>";
  }
  return objects;
}

}  // namespace tfk8s::testing
