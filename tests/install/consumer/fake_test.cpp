// A user's test built against the installed package: tfk8s::testing's FakeCluster, linked as
// its own library (tfk8s::testing), stores what the real Client sends.
#include <tfk8s/testing/fake_cluster.hpp>

#include <iostream>

int main() {
  tfk8s::testing::FakeCluster fake;
  tfk8s::Client client = fake.client("team");
  client.Apply(tfk8s::Json{{"apiVersion", "v1"},
                           {"kind", "ConfigMap"},
                           {"metadata", {{"name", "settings"}, {"namespace", "default"}}},
                           {"data", {{"k", "v"}}}});
  auto stored = fake.Find("v1", "ConfigMap", "default", "settings");
  std::cout << (stored ? (*stored)["data"]["k"].get<std::string>() : "missing") << "\n";
  return 0;
}
