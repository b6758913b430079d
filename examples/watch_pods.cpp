// Prints pod events in a namespace as they happen (list-then-watch with resume and relist).
//   watch_pods [namespace] [seconds]
#include <tfk8s/client.hpp>

#include <chrono>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  std::string ns = argc > 1 ? argv[1] : "default";
  int seconds = argc > 2 ? std::stoi(argv[2]) : 30;
  try {
    tfk8s::Client client = tfk8s::Client::FromDefault();
    tfk8s::Informer informer(client, {"", "v1", "Pod", "pods", true}, ns);
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < until) {
      auto event = informer.Next(std::chrono::seconds(1));
      if (!event) continue;
      const auto& pod = event->object;
      std::cout << tfk8s::ToString(event->type) << " " << pod["metadata"]["name"].get<std::string>()
                << " " << pod.value("status", tfk8s::Json::object()).value("phase", "") << "\n";
    }
    return 0;
  } catch (const tfk8s::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
}
