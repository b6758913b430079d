// Least privilege on the local cluster (RBAC on): the in-cluster launching Role of a
// DevInstance (`launch_workloads`) can create and delete every tfk8s workload in its own
// namespace, but reads no Secret (so no other user's password) and touches no other namespace;
// per-user credential readers (`security.credentialReaders`) let each user read their own
// instance's password and no one else's. Each account is used through its own token.
#include <set>
#include <string>

#include "cluster.hpp"
#include "tfk8s/devinstance.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"
#include "util/base64.hpp"
#include "workloads/kinds.hpp"
#include "workloads/start_script.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;
using namespace std::chrono_literals;

namespace {

using internal::kinds::kSecrets;
const ResourceType kServiceAccounts{"", "v1", "ServiceAccount", "serviceaccounts", true};
const ResourceType kRoles{"rbac.authorization.k8s.io", "v1", "Role", "roles", true};
const ResourceType kRoleBindings{"rbac.authorization.k8s.io", "v1", "RoleBinding",
                                 "rolebindings", true};

// A client authenticated only as the service account (its token from the token controller).
Client AsServiceAccount(Client& admin, const std::string& ns, const std::string& sa) {
  std::string token;
  REQUIRE_MESSAGE(TestNamespace::WaitFor(
                      [&] {
                        try {
                          Json account = admin.Get(kServiceAccounts, ns, sa);
                          for (const auto& ref : account.value("secrets", Json::array())) {
                            Json s = admin.Get(kSecrets, ns, ref.value("name", ""));
                            if (s.contains("data") && s["data"].contains("token")) {
                              token = internal::Base64Decode(s["data"]["token"].get<std::string>())
                                          .value_or("");
                            }
                          }
                        } catch (const NotFound&) {
                        }
                        return !token.empty();
                      },
                      30s),
                  (std::string("no token for service account ") + sa));
  ClientConfig c = ConfigFor();
  c.token = token;
  c.token_file.clear();
  c.client_cert_pem.clear();
  c.client_key_pem.clear();
  c.exec.reset();
  c.default_namespace = ns;
  return Client(c);
}

std::string StoredPassword(Client& c, const std::string& ns, const std::string& secret) {
  auto credentials = internal::CredentialsFromSecret(c.Get(kSecrets, ns, secret));
  REQUIRE(credentials);
  return credentials->password;
}

template <typename F>
void CheckForbidden(const char* what, F&& call) {
  CAPTURE(what);
  CHECK_THROWS_AS(call(), Forbidden);
}

DevInstanceSpec Dev(const std::string& ns, const std::string& owner) {
  DevInstanceSpec s;
  s.owner = owner;
  s.name = owner + "-dev";
  s.namespace_name = ns;
  s.resources = {"100m", "128Mi", "", "", 0};
  s.home.enabled = false;
  return s;
}

TFClusterSpec Cluster(const std::string& ns) {
  TFClusterSpec s;
  s.name = "inside";
  s.namespace_name = ns;
  s.ps.replicas = 1;
  s.ps.resources = {"100m", "128Mi", "", "", 0};
  s.worker.replicas = 1;
  s.worker.resources = {"100m", "128Mi", "", "", 0};
  s.session = TFSessionSpec{};
  return s;
}

}  // namespace

TEST_SUITE("rbac") {
  TEST_CASE("the launching Role: creates and deletes workloads in its namespace, reads no Secret, touches no other namespace") {
    Client admin = AdminClient();
    TestNamespace ns(admin, "rbac");
    TestNamespace other(admin, "rbac-other");
    // A teammate's instance: its Secret holds bob's password.
    DevCreateOptions stopped;
    stopped.start = false;
    DevInstance bob(admin, Dev(ns.name(), "bob"));
    bob.Create(stopped);
    // Alice's instance may launch workloads: its own account, Role and RoleBinding.
    DevInstanceSpec alice_spec = Dev(ns.name(), "alice");
    alice_spec.launch_workloads = true;
    DevInstance(admin, alice_spec).Create(stopped);
    Client inside = AsServiceAccount(admin, ns.name(), "alice-dev");

    SUBCASE("a TFCluster with a session: created, its password told once, kept, pruned") {
      TFCluster cluster(inside, Cluster(ns.name()));
      cluster.Apply();
      const std::string secret = "inside-session-credentials";
      // The object whose Apply created the Secret knows the password; the Secret agrees.
      std::string password = cluster.Session().password;
      CHECK(password.size() >= 16);
      CHECK(StoredPassword(admin, ns.name(), secret) == password);
      Json before = admin.Get(kSecrets, ns.name(), secret);
      // Any other object cannot read it, and says why.
      TFCluster again(inside, Cluster(ns.name()));
      try {
        again.Session();
        FAIL("the launching account read the session's password");
      } catch (const Forbidden& e) {
        CHECK(std::string(e.what()).find("may not read") != std::string::npos);
        CHECK(std::string(e.what()).find(password) == std::string::npos);
      }
      // A re-apply keeps the Secret as it is (same object, same password).
      again.Apply();
      Json after = admin.Get(kSecrets, ns.name(), secret);
      CHECK(after["metadata"]["uid"] == before["metadata"]["uid"]);
      CHECK(StoredPassword(admin, ns.name(), secret) == password);
      // Without the session, pruning deletes the Secret by name.
      TFClusterSpec plain = Cluster(ns.name());
      plain.session.reset();
      TFCluster(inside, plain).Apply();
      CHECK_THROWS_AS(admin.Get(kSecrets, ns.name(), secret), NotFound);
      TFDeleteOptions del;
      del.wait = 60s;
      TFCluster(inside, plain).Delete(del);
      CHECK_THROWS_AS(admin.Get({"", "v1", "ConfigMap", "configmaps", true}, ns.name(), "inside"),
                      NotFound);
    }

    SUBCASE("a DevInstance: create, stop, start (a new password), apply, delete") {
      DevInstanceSpec carol_spec = Dev(ns.name(), "carol");
      DevInstance carol(inside, carol_spec);
      std::string first = carol.Create().password;
      CHECK(StoredPassword(admin, ns.name(), "carol-dev-credentials") == first);
      carol.Stop();
      std::string second = carol.Start().password;
      CHECK(second != first);
      CHECK(StoredPassword(admin, ns.name(), "carol-dev-credentials") == second);
      // Apply without a change of keys leaves the (unreadable) Secret alone.
      carol.Apply();
      CHECK(StoredPassword(admin, ns.name(), "carol-dev-credentials") == second);
      // A change of authorized keys would need the password: refused, nothing changed.
      carol_spec.security.ssh_authorized_keys = {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE carol"};
      try {
        DevInstance(inside, carol_spec).Apply();
        FAIL("changed keys were applied without reading the password");
      } catch (const Forbidden& e) {
        CHECK(std::string(e.what()).find("carol-dev-credentials") != std::string::npos);
      }
      CHECK(StoredPassword(admin, ns.name(), "carol-dev-credentials") == second);
      DevDeleteOptions del;
      del.wait = 60s;
      carol.Delete(del);
      CHECK_THROWS_AS(admin.Get(kSecrets, ns.name(), "carol-dev-credentials"), NotFound);
    }

    SUBCASE("a ScheduledJob: applied and deleted") {
      ScheduledJobSpec s;
      s.name = "nightly";
      s.namespace_name = ns.name();
      s.image = "python:3.11-slim";
      s.exec_command = "python3";
      s.entry_path = "train.py";
      s.schedule = "0 3 * * *";
      s.resources = {"100m", "128Mi", "", "", 0};
      ScheduledJob job(inside, s);
      job.Apply();
      CHECK(admin.Get({"batch", "v1beta1", "CronJob", "cronjobs", true}, ns.name(), "nightly")
                .is_object());
      job.Delete();
      CHECK(TestNamespace::WaitFor(
          [&] {
            try {
              admin.Get({"batch", "v1beta1", "CronJob", "cronjobs", true}, ns.name(), "nightly");
              return false;
            } catch (const NotFound&) {
              return true;
            }
          },
          30s));
    }

    SUBCASE("refused: other users' Secrets, any Secret read, RBAC, other namespaces") {
      CheckForbidden("get bob's credentials", [&] {
        return inside.Get(kSecrets, ns.name(), "bob-dev-credentials");
      });
      CheckForbidden("list Secrets", [&] { return inside.ListAll(kSecrets, ns.name()); });
      CheckForbidden("patch bob's credentials", [&] {
        return inside.Patch(kSecrets, ns.name(), "bob-dev-credentials", PatchType::kMerge,
                            {{"metadata", {{"labels", {{"x", "y"}}}}}});
      });
      CheckForbidden("grant itself more", [&] {
        return inside.Create(kRoles, ns.name(),
                             {{"metadata", {{"name", "more"}}},
                              {"rules", Json::array({{{"apiGroups", {""}},
                                                      {"resources", {"secrets"}},
                                                      {"verbs", {"get"}}}})}});
      });
      CheckForbidden("a ConfigMap in another namespace", [&] {
        return inside.Create({"", "v1", "ConfigMap", "configmaps", true}, other.name(),
                             ConfigMap("x"));
      });
      CheckForbidden("pods of another namespace",
                     [&] { return inside.ListAll(kPods, other.name()); });
      CheckForbidden("a TFCluster in another namespace",
                     [&] { return TFCluster(inside, Cluster(other.name())).Apply(); });
      CHECK_THROWS_AS(admin.Get({"", "v1", "ConfigMap", "configmaps", true}, other.name(), "x"),
                      NotFound);
      // What it may do is exactly the documented rules.
      Json role = admin.Get(kRoles, ns.name(), "alice-dev-workloads");
      CHECK(role["rules"] == DevInstanceWorkloadRules());
    }
  }

  TEST_CASE("per-user credential readers: each user reads their own instance's password, and no one else's") {
    Client admin = AdminClient();
    TestNamespace ns(admin, "creds");
    // Two team members: they may work with workloads (the launching rules: no Secret reads).
    Json team = {{"metadata", {{"name", "team"}}}, {"rules", DevInstanceWorkloadRules()}};
    admin.Create(kRoles, ns.name(), team);
    Json subjects = Json::array();
    for (const char* user : {"alice", "bob"}) {
      admin.Create(kServiceAccounts, ns.name(), {{"metadata", {{"name", user}}}});
      subjects.push_back({{"kind", "ServiceAccount"}, {"name", user}, {"namespace", ns.name()}});
    }
    admin.Create(kRoleBindings, ns.name(),
                 {{"metadata", {{"name", "team"}}},
                  {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"},
                               {"kind", "Role"},
                               {"name", "team"}}},
                  {"subjects", subjects}});
    std::string passwords[2];
    const char* users[] = {"alice", "bob"};
    for (int i = 0; i < 2; ++i) {
      DevInstanceSpec s = Dev(ns.name(), users[i]);
      s.security.credential_readers = {{"ServiceAccount", users[i], ""}};
      passwords[i] = DevInstance(admin, s).Create().password;
    }
    Client alice = AsServiceAccount(admin, ns.name(), "alice");
    Client bob = AsServiceAccount(admin, ns.name(), "bob");
    CHECK(StoredPassword(alice, ns.name(), "alice-dev-credentials") == passwords[0]);
    CHECK(StoredPassword(bob, ns.name(), "bob-dev-credentials") == passwords[1]);
    CheckForbidden("alice reads bob's",
                   [&] { return alice.Get(kSecrets, ns.name(), "bob-dev-credentials"); });
    CheckForbidden("bob reads alice's",
                   [&] { return bob.Get(kSecrets, ns.name(), "alice-dev-credentials"); });
    CheckForbidden("alice lists Secrets", [&] { return alice.ListAll(kSecrets, ns.name()); });
    CheckForbidden("alice reads the service account tokens' Secrets", [&] {
      Json account = admin.Get(kServiceAccounts, ns.name(), "bob");
      return alice.Get(kSecrets, ns.name(), account["secrets"][0].value("name", ""));
    });

    // A restart replaces the Secret whole: the same name, so alice reads the new password.
    DevInstanceSpec alice_spec = Dev(ns.name(), "alice");
    alice_spec.security.credential_readers = {{"ServiceAccount", "alice", ""}};
    DevInstance alice_dev(admin, alice_spec);
    std::string renewed = alice_dev.Restart().password;
    CHECK(renewed != passwords[0]);
    CHECK(StoredPassword(alice, ns.name(), "alice-dev-credentials") == renewed);

    // The Role and RoleBinding belong to the instance: gone with it.
    DevDeleteOptions del;
    del.wait = 60s;
    alice_dev.Delete(del);
    CHECK(TestNamespace::WaitFor(
        [&] {
          try {
            admin.Get(kRoles, ns.name(), "alice-dev-credentials-reader");
            return false;
          } catch (const NotFound&) {
            return true;
          }
        },
        30s));
    CheckForbidden("alice after her instance is gone",
                   [&] { return alice.Get(kSecrets, ns.name(), "alice-dev-credentials"); });
  }
}
