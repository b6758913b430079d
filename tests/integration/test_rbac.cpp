// Least privilege on the local cluster (RBAC on): the in-cluster launching Role of a
// DevInstance (`launch_workloads`) lives only in a namespace personal to the instance's owner
// (a Quota member's namespace), where it creates and deletes every tfk8s workload and reads the
// owner's own Secrets; it reaches nothing of another user's — no Secret, no Job or pod there
// (so no mount of their Secret or home), no patch of their StatefulSet, no logs, no exec, no
// port-forward — and launchWorkloads is refused before anything is sent anywhere else. Per-user
// credential readers (`security.credentialReaders`) let each user read their own instance's
// password and no one else's. Each account is used through its own token.
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "cluster.hpp"
#include "tfk8s/devinstance.hpp"
#include "tfk8s/quota.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"
#include "util/base64.hpp"
#include "workloads/common.hpp"
#include "workloads/kinds.hpp"
#include "workloads/start_script.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;
using namespace std::chrono_literals;

namespace {

using internal::kinds::kSecrets;
const ResourceType kServiceAccounts{"", "v1", "ServiceAccount", "serviceaccounts", true};
const ResourceType kRoles{"rbac.authorization.k8s.io", "v1", "Role", "roles", true};
const ResourceType kRoleBindings{"rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings",
                                 true};

// A client authenticated only as the service account (its token from the token controller).
Client AsServiceAccount(Client& admin, const std::string& ns, const std::string& sa) {
  std::string token;
  REQUIRE_MESSAGE(
      TestNamespace::WaitFor(
          [&] {
            try {
              Json account = admin.Get(kServiceAccounts, ns, sa);
              for (const auto& ref : account.value("secrets", Json::array())) {
                Json s = admin.Get(kSecrets, ns, ref.value("name", ""));
                if (s.contains("data") && s["data"].contains("token")) {
                  token =
                      internal::Base64Decode(s["data"]["token"].get<std::string>()).value_or("");
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

// A team queue whose members each get a personal namespace (`<team>-<member>`); every
// namespace of it is deleted afterwards.
class Team {
 public:
  Team(Client admin, std::vector<std::string> members, std::map<std::string, std::string> hard)
      : admin_(std::move(admin)) {
    spec_.name = UniqueName("team");
    spec_.members = std::move(members);
    spec_.hard = std::move(hard);
    ApplyQuota(admin_, spec_);
    for (const auto& ns : Namespaces()) {
      // Pods are refused until the default account has its token.
      REQUIRE(TestNamespace::WaitFor(
          [&] {
            try {
              return !admin_.Get(kServiceAccounts, ns, "default")
                          .value("secrets", Json::array())
                          .empty();
            } catch (const NotFound&) {
              return false;
            }
          },
          30s));
    }
  }
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;
  ~Team() {
    for (const auto& ns : Namespaces()) {
      try {
        admin_.Delete(kNamespaces, "", ns);
      } catch (...) {
      }
    }
  }
  /// The team's own (shared) namespace.
  const std::string& shared() const { return spec_.name; }
  /// The namespace personal to `member`.
  std::string of(const std::string& member) const { return spec_.name + "-" + member; }
  std::vector<std::string> Namespaces() const {
    std::vector<std::string> out{spec_.name};
    for (const auto& m : spec_.members) out.push_back(of(m));
    return out;
  }

 private:
  Client admin_;
  QuotaSpec spec_;
};

const ResourceType kJobs{"batch", "v1", "Job", "jobs", true};
const ResourceType kStatefulSetType{"apps", "v1", "StatefulSet", "statefulsets", true};
const ResourceType kClaims{"", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true};
const ResourceType kEventType{"", "v1", "Event", "events", true};

// A Job whose pod mounts the Secret `secret` and prints it: what a user would try in order to
// read a teammate's credentials. A secret volume names no namespace: `namespace` is sent too, to
// show the API has no such field (the server drops it).
Json SecretPrintingJob(const std::string& secret, const std::string& ns) {
  return {
      {"apiVersion", "batch/v1"},
      {"kind", "Job"},
      {"metadata", {{"name", "print-" + secret}}},
      {"spec",
       {{"backoffLimit", 0},
        {"template",
         {{"spec",
           {{"restartPolicy", "Never"},
            {"containers", Json::array({{{"name", "cat"},
                                         {"image", "busybox"},
                                         {"command", {"cat", "/s/password"}},
                                         {"volumeMounts",
                                          Json::array({{{"name", "s"}, {"mountPath", "/s"}}})}}})},
            {"volumes",
             Json::array({{{"name", "s"},
                           {"secret", {{"secretName", secret}, {"namespace", ns}}}}})}}}}}}}};
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
  TEST_CASE(
      "the launching Role in a personal namespace: the owner's workloads and Secrets, nothing of "
      "another user's") {
    Client admin = AdminClient();
    Team team(admin, {"alice", "bob"}, {{"pods", "10"}});
    const std::string mine = team.of("alice");
    const std::string bobs = team.of("bob");
    // A teammate's running instance in his own namespace: his password, his home, his pod.
    DevInstanceSpec bob_spec = Dev(bobs, "bob");
    bob_spec.home.enabled = true;
    bob_spec.home.size = "1Gi";
    DevInstance bob(admin, bob_spec);
    bob.Create();
    // Alice's instance may launch workloads: its own account, Role and RoleBinding.
    DevCreateOptions stopped;
    stopped.start = false;
    DevInstanceSpec alice_spec = Dev(mine, "alice");
    alice_spec.launch_workloads = true;
    DevInstance(admin, alice_spec).Create(stopped);
    Client inside = AsServiceAccount(admin, mine, "alice-dev");

    SUBCASE("a TFCluster with a session: created, its password kept and read back, pruned") {
      TFCluster cluster(inside, Cluster(mine));
      cluster.Apply();
      const std::string secret = "inside-session-credentials";
      std::string password = cluster.Session().password;
      CHECK(password.size() >= 16);
      CHECK(StoredPassword(admin, mine, secret) == password);
      Json before = admin.Get(kSecrets, mine, secret);
      // Another object reads it (the Secret is the owner's, in her namespace).
      TFCluster again(inside, Cluster(mine));
      CHECK(again.Session().password == password);
      // A re-apply keeps the Secret as it is (same object, same password).
      again.Apply();
      Json after = admin.Get(kSecrets, mine, secret);
      CHECK(after["metadata"]["uid"] == before["metadata"]["uid"]);
      CHECK(StoredPassword(admin, mine, secret) == password);
      // Without the session, pruning deletes the Secret by name.
      TFClusterSpec plain = Cluster(mine);
      plain.session.reset();
      TFCluster(inside, plain).Apply();
      CHECK_THROWS_AS(admin.Get(kSecrets, mine, secret), NotFound);
      TFDeleteOptions del;
      del.wait = 60s;
      TFCluster(inside, plain).Delete(del);
      CHECK_THROWS_AS(admin.Get({"", "v1", "ConfigMap", "configmaps", true}, mine, "inside"),
                      NotFound);
    }

    SUBCASE("another DevInstance of hers: create, stop, start (a new password), apply, delete") {
      DevInstanceSpec lab_spec = Dev(mine, "alice");
      lab_spec.name = "alice-lab";
      DevInstance lab(inside, lab_spec);
      std::string first = lab.Create().password;
      CHECK(StoredPassword(admin, mine, "alice-lab-credentials") == first);
      lab.Stop();
      std::string second = lab.Start().password;
      CHECK(second != first);
      CHECK(StoredPassword(admin, mine, "alice-lab-credentials") == second);
      // A change of authorized keys keeps the password, read back from her own Secret.
      lab_spec.security.ssh_authorized_keys = {"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE alice"};
      DevInstance(inside, lab_spec).Apply();
      CHECK(StoredPassword(admin, mine, "alice-lab-credentials") == second);
      Json stored = admin.Get(kSecrets, mine, "alice-lab-credentials");
      CHECK(internal::Base64Decode(stored["data"]["authorized_keys"].get<std::string>())
                .value_or("")
                .find("alice") != std::string::npos);
      DevDeleteOptions del;
      del.wait = 60s;
      lab.Delete(del);
      CHECK_THROWS_AS(admin.Get(kSecrets, mine, "alice-lab-credentials"), NotFound);
    }

    SUBCASE("a ScheduledJob: applied and deleted") {
      ScheduledJobSpec s;
      s.name = "nightly";
      s.namespace_name = mine;
      s.image = "python:3.11-slim";
      s.exec_command = "python3";
      s.entry_path = "train.py";
      s.schedule = "0 3 * * *";
      s.resources = {"100m", "128Mi", "", "", 0};
      ScheduledJob job(inside, s);
      job.Apply();
      CHECK(admin.Get({"batch", "v1beta1", "CronJob", "cronjobs", true}, mine, "nightly")
                .is_object());
      job.Delete();
      CHECK(TestNamespace::WaitFor(
          [&] {
            try {
              admin.Get({"batch", "v1beta1", "CronJob", "cronjobs", true}, mine, "nightly");
              return false;
            } catch (const NotFound&) {
              return true;
            }
          },
          30s));
    }

    SUBCASE("refused: every route to bob's credentials, home, instance and pod") {
      REQUIRE(TestNamespace::WaitFor(
          [&] {
            auto pod = internal::GetOptional(admin, kPods, bobs, "bob-dev-0");
            return pod && pod->value("status", Json::object()).value("phase", "") == "Running";
          },
          60s));
      // Direct reads.
      CheckForbidden("get bob's credentials",
                     [&] { return inside.Get(kSecrets, bobs, "bob-dev-credentials"); });
      CheckForbidden("list bob's Secrets", [&] { return inside.ListAll(kSecrets, bobs); });
      // A Job (or any pod) in bob's namespace, which could mount his Secret or home.
      CheckForbidden("a Job in bob's namespace mounting his Secret", [&] {
        return inside.Create(kJobs, bobs, SecretPrintingJob("bob-dev-credentials", bobs));
      });
      // His StatefulSet: her image on his home volume and credentials.
      CheckForbidden("patch bob's StatefulSet", [&] {
        return inside.Patch(
            kStatefulSetType, bobs, "bob-dev", PatchType::kMerge,
            {{"spec",
              {{"template",
                {{"spec",
                  {{"containers", Json::array({{{"name", "notebook"},
                                                {"image", "evil.example/backdoor:1"}}})}}}}}}}});
      });
      CheckForbidden("bob's pod's logs", [&] { return inside.ReadLogs(bobs, "bob-dev-0"); });
      CheckForbidden("exec into bob's pod", [&] {
        return inside.Exec(bobs, "bob-dev-0", {"cat", "/etc/hostname"});
      });
      CheckForbidden("port-forward to bob's pod",
                     [&] { return inside.ForwardPort(bobs, "bob-dev-0", 22); });
      CheckForbidden("a DevInstance in bob's namespace",
                     [&] { return DevInstance(inside, Dev(bobs, "alice")).Create(stopped); });
      CheckForbidden("pods of the team's shared namespace",
                     [&] { return inside.ListAll(kPods, team.shared()); });
      CheckForbidden("grant itself more", [&] {
        return inside.Create(
            kRoles, mine,
            {{"metadata", {{"name", "more"}}},
             {"rules",
              Json::array(
                  {{{"apiGroups", {""}}, {"resources", {"secrets"}}, {"verbs", {"list"}}}})}});
      });
      CHECK(admin.Get(kStatefulSetType, bobs,
                      "bob-dev")["spec"]["template"]["spec"]["containers"][0]["image"] ==
            bob_spec.image);

      // In her own namespace a pod may mount only Secrets of her namespace: a secret volume
      // names no namespace (the server drops the field), and bob's Secret is not there.
      Json job = inside.Create(kJobs, mine, SecretPrintingJob("bob-dev-credentials", bobs));
      CHECK_FALSE(job["spec"]["template"]["spec"]["volumes"][0]["secret"].contains("namespace"));
      CHECK_THROWS_AS(inside.Get(kSecrets, mine, "bob-dev-credentials"), NotFound);
      CHECK_THROWS_AS(admin.Get(kSecrets, mine, "bob-dev-credentials"), NotFound);
      DeleteOptions background;
      background.propagation_policy = "Background";
      inside.Delete(kJobs, mine, job["metadata"]["name"].get<std::string>(), background);

      // Nor bob's home: a claim of hers naming his home's volume is never bound to it.
      std::string volume;
      REQUIRE(TestNamespace::WaitFor(
          [&] {
            volume = admin.Get(kClaims, bobs, HomeClaimName("bob"))
                         .value("spec", Json::object())
                         .value("volumeName", "");
            return !volume.empty();
          },
          60s));
      inside.Create(kClaims, mine,
                    {{"metadata", {{"name", "bobs-home"}}},
                     {"spec",
                      {{"accessModes", {"ReadWriteOnce"}},
                       {"volumeName", volume},
                       {"resources", {{"requests", {{"storage", "1Gi"}}}}}}}});
      ListOptions about;
      about.field_selector = "involvedObject.name=bobs-home,reason=FailedBinding";
      CHECK_MESSAGE(
          TestNamespace::WaitFor(
              [&] { return !internal::Items(admin.ListAll(kEventType, mine, about)).empty(); },
              60s),
          "the volume controller never said the volume is bound to another claim");
      Json claim = admin.Get(kClaims, mine, "bobs-home");
      CHECK(claim.value("status", Json::object()).value("phase", "") == "Pending");
      Json pv = admin.Get({"", "v1", "PersistentVolume", "persistentvolumes", false}, "", volume);
      CHECK(pv["spec"]["claimRef"]["namespace"] == bobs);
      // What it may do is exactly the documented rules.
      Json role = admin.Get(kRoles, mine, "alice-dev-workloads");
      CHECK(role["rules"] == DevInstanceWorkloadRules());
    }

    SUBCASE("the quota pre-flight counts the team's total over its namespaces, from inside") {
      Json pod = {{"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "busybox"}}})}}}};
      // Her namespace alone has room for 10 pods; bob's running pod leaves the team 9.
      FitResult nine = CheckQuotaForPods(inside, mine, pod, 9);
      CHECK(nine.fits);
      CHECK(nine.notes.empty());
      FitResult ten = CheckQuotaForPods(inside, mine, pod, 10);
      REQUIRE_FALSE(ten.fits);
      REQUIRE(ten.shortfalls.size() == 1);
      CHECK(ten.shortfalls[0].resource == "pods");
      CHECK(ten.shortfalls[0].used.ToString() == "1");
      CHECK(ten.shortfalls[0].quota.find("team total over " + mine) != std::string::npos);
      CHECK(ten.shortfalls[0].quota.find(bobs) != std::string::npos);
      // The same answer with the administrator's credentials.
      CHECK(CheckQuotaForPods(admin, mine, pod, 10).shortfalls.size() == 1);
    }
  }

  TEST_CASE(
      "launchWorkloads is refused outside a namespace personal to the owner, before anything is "
      "sent") {
    Client admin = AdminClient();
    Team team(admin, {"alice", "bob"}, {});
    TestNamespace plain(admin, "plain");
    auto refused = [&](const std::string& ns, const std::string& owner, bool launch) {
      DevInstanceSpec s = Dev(ns, owner);
      s.launch_workloads = launch;
      try {
        DevInstance(admin, s).Create();
        FAIL("created");
      } catch (const ValidationError& e) {
        // Nothing was sent: no StatefulSet, no account.
        CHECK_THROWS_AS(admin.Get(kStatefulSetType, ns, s.name), NotFound);
        CHECK_THROWS_AS(admin.Get(kServiceAccounts, ns, s.name), NotFound);
        return std::make_pair(e.field(), std::string(e.what()));
      }
      return std::make_pair(std::string(), std::string());
    };
    auto [field, what] = refused(team.shared(), "alice", true);
    CHECK(field == "launchWorkloads");
    CHECK(what.find(team.shared() + " is not personal to alice") != std::string::npos);
    CHECK(what.find("members: [alice]") != std::string::npos);
    std::tie(field, what) = refused(plain.name(), "alice", true);
    CHECK(field == "launchWorkloads");
    // Another owner's namespace: refused on the owner, launching or not.
    for (bool launch : {true, false}) {
      std::tie(field, what) = refused(team.of("bob"), "alice", launch);
      CHECK(field == "owner");
      CHECK(what.find("personal to bob") != std::string::npos);
    }
    // Allowed: her own namespace; a single-user team's namespace labelled personal to her.
    DevCreateOptions stopped;
    stopped.start = false;
    DevInstanceSpec ok = Dev(team.of("alice"), "alice");
    ok.launch_workloads = true;
    CHECK_NOTHROW(DevInstance(admin, ok).Create(stopped));
    admin.Patch(kNamespaces, "", plain.name(), PatchType::kMerge,
                {{"metadata", {{"labels", {{"tfk8s.io/owner", "alice"}}}}}});
    ok.namespace_name = plain.name();
    CHECK_NOTHROW(DevInstance(admin, ok).Create(stopped));
  }

  TEST_CASE(
      "per-user credential readers: each user reads their own instance's password, and no one "
      "else's") {
    Client admin = AdminClient();
    TestNamespace ns(admin, "creds");
    // Two team members who may look at the team's workloads but not create pods (whoever may
    // create a pod in a namespace can mount, and so read, every Secret in it: see the test
    // above for the personal-namespace layout that isolates users who launch workloads).
    Json team = {{"metadata", {{"name", "team"}}},
                 {"rules", Json::array({{{"apiGroups", {"", "apps"}},
                                         {"resources", {"pods", "services", "statefulsets"}},
                                         {"verbs", {"get", "list", "watch"}}}})}};
    admin.Create(kRoles, ns.name(), team);
    Json subjects = Json::array();
    for (const char* user : {"alice", "bob"}) {
      admin.Create(kServiceAccounts, ns.name(), {{"metadata", {{"name", user}}}});
      subjects.push_back({{"kind", "ServiceAccount"}, {"name", user}, {"namespace", ns.name()}});
    }
    admin.Create(kRoleBindings, ns.name(),
                 {{"metadata", {{"name", "team"}}},
                  {"roleRef",
                   {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", "team"}}},
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
