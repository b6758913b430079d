// Applies N ConfigMaps concurrently with ApplyAll and reports each result.
//   apply_many [namespace] [count]
#include <tfk8s/client.hpp>

#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  std::string ns = argc > 1 ? argv[1] : "default";
  int count = argc > 2 ? std::stoi(argv[2]) : 20;
  try {
    tfk8s::Client client = tfk8s::Client::FromDefault();
    std::vector<tfk8s::Json> objects;
    for (int i = 0; i < count; ++i) {
      objects.push_back(
          {{"apiVersion", "v1"},
           {"kind", "ConfigMap"},
           {"metadata", {{"name", "example-" + std::to_string(i)}, {"namespace", ns}}},
           {"data", {{"index", std::to_string(i)}}}});
    }
    int failed = 0;
    auto results = client.ApplyAll(objects);
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (!results[i].ok()) {
        ++failed;
        std::cerr << "example-" << i << ": " << results[i].error_message() << "\n";
      }
    }
    std::cout << results.size() - failed << " applied, " << failed << " failed\n";
    return failed == 0 ? 0 : 1;
  } catch (const tfk8s::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
