// A program built against the installed package: uses quantities, config redaction and the
// error model (no server needed).
#include <tfk8s/client.hpp>
#include <tfk8s/quantity.hpp>

#include <iostream>

int main() {
  tfk8s::Quantity q = tfk8s::Quantity::Parse("1.5Gi");
  tfk8s::ClientConfig config;
  config.server = "https://127.0.0.1:6443";
  config.token = "secret";
  std::string printed = config.ToString();
  bool redacted =
      printed.find("secret") == std::string::npos && printed.find("REDACTED") != std::string::npos;
  std::string kind;
  try {
    tfk8s::ThrowApiError(404, R"({"kind":"Status","reason":"NotFound","message":"x","code":404})",
                         "get");
  } catch (const tfk8s::NotFound& e) {
    kind = std::string(tfk8s::ToString(e.kind()));
  }
  std::cout << q.ToString() << " " << (redacted ? "REDACTED" : "LEAK") << " " << kind << "\n";
  return 0;
}
