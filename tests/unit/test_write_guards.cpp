// Writes that must not destroy what they do not own (issue #35), over a scripted transport that
// records every request: DeleteQuota deletes a namespace only when tfk8s created it, with a UID
// precondition; WriteSecretWhole replaces a Secret in place (GET, then a PUT conditional on the
// read resourceVersion), a bounded number of times, and never deletes it. The same behaviour
// against the real apiserver: tests/integration/test_quota.cpp and test_secret_replace.cpp.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "fake_transport.hpp"
#include "tfk8s/quota.hpp"
#include "workloads/common.hpp"

using namespace tfk8s;
using tfk8s::testing::FakeTransport;
using tfk8s::testing::Respond;

namespace {

const std::string kServer = "https://127.0.0.1:6443";

ClientConfig FakeConfig() {
  ClientConfig c;
  c.server = kServer;
  c.token = "t";
  c.rate_limit.qps = 0;
  c.retry.initial_backoff = std::chrono::milliseconds(1);
  c.retry.max_backoff = std::chrono::milliseconds(2);
  return c;
}

std::string Status(int code, const std::string& reason, const std::string& message) {
  return Json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
              {"reason", reason}, {"code", code},       {"message", message}}
      .dump();
}

// "METHOD /path" of every request sent, without the query.
std::vector<std::string> Calls(const FakeTransport& fake) {
  std::vector<std::string> out;
  for (const auto& r : fake.requests()) {
    std::string path = r.url.substr(kServer.size());
    out.push_back(r.method + " " + path.substr(0, path.find('?')));
  }
  return out;
}

Json Namespace(const std::string& name, const Json& labels) {
  return {{"apiVersion", "v1"},
          {"kind", "Namespace"},
          {"metadata",
           {{"name", name}, {"uid", "uid-1"}, {"resourceVersion", "10"}, {"labels", labels}}}};
}

const std::string kSecretPath = "/api/v1/namespaces/team-a/secrets/alice-credentials";

// The Secret tfk8s writes; its data must never reach an error message.
Json DesiredSecret() {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", {{"name", "alice-credentials"}, {"namespace", "team-a"}}},
          {"data", {{"password", "aHVudGVyMi1TRUNSRVQ="}}}};
}

Json StoredSecret(const std::string& version) {
  Json s = DesiredSecret();
  s["metadata"]["uid"] = "secret-uid";
  s["metadata"]["resourceVersion"] = version;
  s["data"]["password"] = "b2xkLVNFQ1JFVA==";
  return s;
}

}  // namespace

TEST_SUITE("write_guards") {
  TEST_CASE("DeleteQuota(delete_namespace): only a namespace tfk8s created, only that UID") {
    for (const Json& labels :
         {Json::object(), Json{{"app.kubernetes.io/managed-by", "someone-else"}}}) {
      CAPTURE(labels.dump());
      auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest&) {
        return Respond(200, Namespace("team-a", labels).dump());
      });
      Client client = internal::ClientOver(FakeConfig(), fake);
      try {
        DeleteQuota(client, "team-a", true);
        FAIL("not refused");
      } catch (const ValidationError& e) {
        const std::string what = e.what();
        CHECK(e.field() == "name");
        CHECK(e.value() == "team-a");
        CHECK_MESSAGE(what.find("not created by tfk8s") != std::string::npos, what);
        CHECK_MESSAGE(what.find("app.kubernetes.io/managed-by") != std::string::npos, what);
      }
      CHECK(Calls(*fake) == std::vector<std::string>{"GET /api/v1/namespaces/team-a"});
    }

    Json sent_body;
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (r.method == "DELETE") {
        sent_body = Json::parse(r.body);
        return Respond(200, Namespace("team-a", {}).dump());
      }
      return Respond(200, Namespace("team-a", {{"app.kubernetes.io/managed-by", "tfk8s"}}).dump());
    });
    Client client = internal::ClientOver(FakeConfig(), fake);
    CHECK(DeleteQuota(client, "team-a", true));
    CHECK(Calls(*fake) == std::vector<std::string>{"GET /api/v1/namespaces/team-a",
                                                   "DELETE /api/v1/namespaces/team-a"});
    CHECK(sent_body["preconditions"]["uid"] == "uid-1");

    // Replaced between the check and the delete: the precondition fails, nothing is deleted,
    // and the error says so.
    auto replaced = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (r.method == "DELETE") {
        return Respond(409, Status(409, "Conflict",
                                   "Precondition failed: UID in precondition: uid-1, UID in "
                                   "object meta: uid-2"));
      }
      return Respond(200, Namespace("team-a", {{"app.kubernetes.io/managed-by", "tfk8s"}}).dump());
    });
    Client racing = internal::ClientOver(FakeConfig(), replaced);
    try {
      DeleteQuota(racing, "team-a", true);
      FAIL("not refused");
    } catch (const Conflict& e) {
      CHECK_MESSAGE(std::string(e.what()).find("namespace team-a changed after it was checked") !=
                        std::string::npos,
                    e.what());
    }
    // A namespace that is already gone is not an error (as before), and the answer says there
    // was nothing to delete: no DELETE is sent.
    auto gone = std::make_shared<FakeTransport>([](const internal::HttpRequest&) {
      return Respond(404, Status(404, "NotFound", "namespaces \"team-a\" not found"));
    });
    Client none = internal::ClientOver(FakeConfig(), gone);
    bool deleted = true;
    CHECK_NOTHROW(deleted = DeleteQuota(none, "team-a", true));
    CHECK_FALSE(deleted);
    CHECK(Calls(*gone) == std::vector<std::string>{"GET /api/v1/namespaces/team-a"});

    // Gone between the check and the delete: nothing was deleted by this call.
    auto vanishing = std::make_shared<FakeTransport>([](const internal::HttpRequest& r) {
      if (r.method == "DELETE") {
        return Respond(404, Status(404, "NotFound", "namespaces \"team-a\" not found"));
      }
      return Respond(200, Namespace("team-a", {{"app.kubernetes.io/managed-by", "tfk8s"}}).dump());
    });
    Client raced = internal::ClientOver(FakeConfig(), vanishing);
    CHECK_FALSE(DeleteQuota(raced, "team-a", true));

    // Already being deleted: counts as deleted, and no second DELETE is sent.
    auto terminating = std::make_shared<FakeTransport>([](const internal::HttpRequest&) {
      Json ns = Namespace("team-a", {{"app.kubernetes.io/managed-by", "tfk8s"}});
      ns["metadata"]["deletionTimestamp"] = "2024-03-01T02:30:00Z";
      return Respond(200, ns.dump());
    });
    Client going = internal::ClientOver(FakeConfig(), terminating);
    CHECK(DeleteQuota(going, "team-a", true));
    CHECK(Calls(*terminating) == std::vector<std::string>{"GET /api/v1/namespaces/team-a"});
  }

  TEST_CASE("DeleteQuota: missing objects are no error, the answer says whether any was there") {
    const std::string quota = "/api/v1/namespaces/team-a/resourcequotas/team-a";
    const std::string limits = "/api/v1/namespaces/team-a/limitranges/team-a";
    struct Case {
      bool quota_exists;
      bool limits_exist;
    };
    for (const Case c :
         {Case{true, true}, Case{true, false}, Case{false, true}, Case{false, false}}) {
      CAPTURE(c.quota_exists);
      CAPTURE(c.limits_exist);
      auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
        const std::string path = r.url.substr(kServer.size());
        const bool exists = path.rfind(quota, 0) == 0 ? c.quota_exists : c.limits_exist;
        if (!exists) return Respond(404, Status(404, "NotFound", "not found"));
        return Respond(200, Json{{"kind", "Status"}, {"status", "Success"}}.dump());
      });
      Client client = internal::ClientOver(FakeConfig(), fake);
      bool deleted = false;
      CHECK_NOTHROW(deleted = DeleteQuota(client, "team-a"));
      CHECK(deleted == (c.quota_exists || c.limits_exist));
      // Both are always asked for: one missing does not keep the other.
      CHECK(Calls(*fake) == std::vector<std::string>{"DELETE " + quota, "DELETE " + limits});
    }
  }

  TEST_CASE("ApplyQuota gives the managed-by label only to a namespace it creates") {
    for (bool exists : {false, true}) {
      CAPTURE(exists);
      Json applied_namespace;
      auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
        const std::string path = r.url.substr(kServer.size());
        if (path == "/api/v1") {
          return Respond(200, R"({"kind":"APIResourceList","groupVersion":"v1","resources":[
            {"name":"namespaces","kind":"Namespace","namespaced":false},
            {"name":"resourcequotas","kind":"ResourceQuota","namespaced":true},
            {"name":"limitranges","kind":"LimitRange","namespaced":true}]})");
        }
        if (r.method == "GET" && path == "/api/v1/namespaces/team-a") {
          if (!exists) return Respond(404, Status(404, "NotFound", "not found"));
          return Respond(200, Namespace("team-a", {{"team", "a"}}).dump());
        }
        if (r.method == "PATCH" && path.rfind("/api/v1/namespaces/team-a?", 0) == 0) {
          applied_namespace = Json::parse(r.body);
        }
        if (r.method == "GET") return Respond(404, Status(404, "NotFound", "not found"));
        return Respond(200, R"({"kind":"Namespace","metadata":{"name":"team-a"}})");
      });
      Client client = internal::ClientOver(FakeConfig(), fake);
      QuotaSpec spec;
      spec.name = "team-a";
      ApplyQuotaOptions options;
      options.wait_ready = false;
      ApplyQuota(client, spec, options);
      REQUIRE(applied_namespace.is_object());
      const Json& labels = applied_namespace["metadata"]["labels"];
      CHECK(labels["tfk8s.io/queue"] == "true");
      CHECK(labels.contains("app.kubernetes.io/managed-by") == !exists);
    }
  }

  TEST_CASE("WriteSecretWhole: replaced in place with the read resourceVersion, never deleted") {
    std::vector<std::string> put_versions;
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (r.method == "POST") {
        return Respond(409, Status(409, "AlreadyExists", "secrets \"alice-credentials\" exists"));
      }
      if (r.method == "GET") return Respond(200, StoredSecret("41").dump());
      if (r.method == "PUT") {
        Json body = Json::parse(r.body);
        put_versions.push_back(body["metadata"].value("resourceVersion", ""));
        CHECK(body["data"] == DesiredSecret()["data"]);
        return Respond(200, body.dump());
      }
      return Respond(500, Status(500, "InternalError", "unexpected " + r.method));
    });
    Client client = internal::ClientOver(FakeConfig(), fake);
    CHECK(internal::WriteSecretWhole(client, DesiredSecret(), /*replace=*/true));
    CHECK(Calls(*fake) == std::vector<std::string>{"POST /api/v1/namespaces/team-a/secrets",
                                                   "GET " + kSecretPath, "PUT " + kSecretPath});
    CHECK(put_versions == std::vector<std::string>{"41"});

    // Without replace, or in a dry run, an existing Secret is left as it is: one create only.
    for (bool dry_run : {false, true}) {
      auto only_create = std::make_shared<FakeTransport>([](const internal::HttpRequest&) {
        return Respond(409, Status(409, "AlreadyExists", "exists"));
      });
      Client c = internal::ClientOver(FakeConfig(), only_create);
      CHECK_FALSE(internal::WriteSecretWhole(c, DesiredSecret(), /*replace=*/dry_run, dry_run));
      CHECK(Calls(*only_create) ==
            std::vector<std::string>{"POST /api/v1/namespaces/team-a/secrets"});
    }
  }

  TEST_CASE("WriteSecretWhole: a writer that always gets in between wins after 3 rounds") {
    int version = 41;
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (r.method == "POST") return Respond(409, Status(409, "AlreadyExists", "exists"));
      if (r.method == "GET") return Respond(200, StoredSecret(std::to_string(version++)).dump());
      if (r.method == "PUT") {
        return Respond(409, Status(409, "Conflict",
                                   "Operation cannot be fulfilled on secrets "
                                   "\"alice-credentials\": the object has been modified"));
      }
      return Respond(500, Status(500, "InternalError", "unexpected " + r.method));
    });
    Client client = internal::ClientOver(FakeConfig(), fake);
    try {
      internal::WriteSecretWhole(client, DesiredSecret(), true);
      FAIL("the Conflict did not stand");
    } catch (const Conflict& e) {
      const std::string what = e.what();
      // Neither the data written nor the data read.
      CHECK(what.find("aHVudGVy") == std::string::npos);
      CHECK(what.find("b2xkLVNF") == std::string::npos);
      CHECK(what.find("SECRET") == std::string::npos);
    }
    const auto calls = Calls(*fake);
    CHECK(calls.size() == 1 + 3 * 2);  // the create, then 3 rounds of GET + PUT
    for (const auto& call : calls) CHECK(call.rfind("DELETE", 0) != 0);

    // Deleted between the create and the read: created again.
    bool created = false;
    auto deleted = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (r.method == "POST" && !created) {
        created = true;
        return Respond(409, Status(409, "AlreadyExists", "exists"));
      }
      if (r.method == "GET") return Respond(404, Status(404, "NotFound", "not found"));
      return Respond(201, StoredSecret("50").dump());
    });
    Client c = internal::ClientOver(FakeConfig(), deleted);
    CHECK(internal::WriteSecretWhole(c, DesiredSecret(), true));
    CHECK(Calls(*deleted) == std::vector<std::string>{"POST /api/v1/namespaces/team-a/secrets",
                                                      "GET " + kSecretPath,
                                                      "POST /api/v1/namespaces/team-a/secrets"});
  }
}
