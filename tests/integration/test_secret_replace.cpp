// WriteSecretWhole against the real apiserver (issue #35): a credentials Secret is replaced in
// place (same object, same UID, new data) and never deleted to be created again, so a replace
// that fails leaves the old Secret whole for the pods that mount it.
#include <atomic>
#include <functional>
#include <future>
#include <string>

#include "cluster.hpp"
#include "http/transport.hpp"
#include "workloads/common.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;

namespace {

const ResourceType kSecrets{"", "v1", "Secret", "secrets", true};

Json Secret(const std::string& ns, const std::string& name, const std::string& password) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"labels", {{"app", "creds"}}}}},
          {"stringData", {{"password", password}}}};
}

std::string PasswordOf(const Json& secret) { return secret["data"].value("password", ""); }

// The curl transport, except that before every PUT of a Secret it lets `writer` change that
// Secret first: another writer always in between the read and the write, so the server's own
// resourceVersion precondition fails every time.
class WriterInBetween : public internal::HttpTransport {
 public:
  explicit WriterInBetween(std::function<void()> writer)
      : inner_(internal::MakeCurlTransport()), writer_(std::move(writer)) {}
  std::future<internal::HttpResponse> Send(internal::HttpRequest request) override {
    if (request.method == "PUT" && request.url.find("/secrets/") != std::string::npos) {
      ++puts_;
      writer_();
    }
    return inner_->Send(std::move(request));
  }
  std::shared_ptr<internal::HttpStream> Open(internal::HttpRequest request) override {
    return inner_->Open(std::move(request));
  }
  int puts() const { return puts_; }

 private:
  std::shared_ptr<internal::HttpTransport> inner_;
  std::function<void()> writer_;
  std::atomic<int> puts_{0};
};

}  // namespace

TEST_SUITE("secret_replace") {
  TEST_CASE("a replaced Secret is the same object (UID) with the new data") {
    Client c = AdminClient();
    TestNamespace ns(c, "secret");
    CHECK(internal::WriteSecretWhole(c, Secret(ns.name(), "creds", "old-pw"), true));
    const Json first = c.Get(kSecrets, ns.name(), "creds");
    CHECK(internal::WriteSecretWhole(c, Secret(ns.name(), "creds", "new-pw"), true));
    const Json second = c.Get(kSecrets, ns.name(), "creds");
    CHECK(second["metadata"]["uid"] == first["metadata"]["uid"]);
    CHECK(second["metadata"]["resourceVersion"] != first["metadata"]["resourceVersion"]);
    CHECK(PasswordOf(second) != PasswordOf(first));
    CHECK(PasswordOf(second) == "bmV3LXB3");  // base64("new-pw")
    // Without replace it is left alone.
    CHECK_FALSE(internal::WriteSecretWhole(c, Secret(ns.name(), "creds", "third"), false));
    CHECK(PasswordOf(c.Get(kSecrets, ns.name(), "creds")) == "bmV3LXB3");
  }

  TEST_CASE("a replace the server refuses leaves the old Secret whole") {
    Client c = AdminClient();
    TestNamespace ns(c, "secret");
    // Refused by the server's precondition: another writer changes the Secret between every
    // read and write. After the bounded rounds the Conflict stands; the Secret is the old one
    // (the other writer's label change aside), never deleted.
    CHECK(internal::WriteSecretWhole(c, Secret(ns.name(), "creds", "old-pw"), true));
    const Json before = c.Get(kSecrets, ns.name(), "creds");
    int bumps = 0;
    auto transport = std::make_shared<WriterInBetween>([&] {
      c.Patch(kSecrets, ns.name(), "creds", PatchType::kMerge,
              {{"metadata", {{"labels", {{"bump", std::to_string(++bumps)}}}}}});
    });
    Client racing = internal::ClientOver(ConfigFor(), transport);
    try {
      internal::WriteSecretWhole(racing, Secret(ns.name(), "creds", "new-pw"), true);
      FAIL("the replace went through although every precondition failed");
    } catch (const Conflict& e) {
      CHECK(std::string(e.what()).find("bmV3") == std::string::npos);
      CHECK(std::string(e.what()).find("new-pw") == std::string::npos);
    }
    CHECK(transport->puts() == 3);
    const Json after = c.Get(kSecrets, ns.name(), "creds");
    CHECK(after["metadata"]["uid"] == before["metadata"]["uid"]);
    CHECK(PasswordOf(after) == PasswordOf(before));
    CHECK(after["metadata"]["labels"]["bump"] == "3");

    // Refused for what it writes: an immutable Secret cannot take new data. The old code
    // deleted and re-created it; now the PUT fails and the Secret stays as it was.
    Json frozen = Secret(ns.name(), "frozen", "old-pw");
    frozen["immutable"] = true;
    c.Create(kSecrets, ns.name(), frozen);
    const Json frozen_before = c.Get(kSecrets, ns.name(), "frozen");
    CHECK_THROWS_AS(internal::WriteSecretWhole(c, Secret(ns.name(), "frozen", "new-pw"), true),
                    Invalid);
    const Json frozen_after = c.Get(kSecrets, ns.name(), "frozen");
    CHECK(frozen_after["metadata"]["uid"] == frozen_before["metadata"]["uid"]);
    CHECK(PasswordOf(frozen_after) == PasswordOf(frozen_before));
  }
}
