// The fault suite of issue #17 ("Client robustness"): the client against the real apiserver of
// the local cluster while a loopback proxy (fault_proxy.hpp) resets, cuts, black-holes and
// rate-limits its connections, while the apiserver itself restarts, and while the token of a
// watching client is revoked.
//
// Every scenario counts instead of sampling: the events an Informer delivers are recorded per
// object and resourceVersion, so an event delivered twice (the same name@resourceVersion) fails;
// every write the test makes records the resourceVersion the server gave it, and without a relist
// the delivered versions must be exactly the written ones (none lost, none invented); the
// Informer's final view must equal a LIST made at the end; and the writes that reach the server
// are counted (by the proxy, or by comparing the final versions with the versions the client was
// told), so a write sent twice fails.
//
// CTest runs this suite alone (integration_faults, RUN_SERIAL): it restarts the shared
// apiserver. Timeouts are short in the clients built here so the recovery paths run in seconds.
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "cluster.hpp"
#include "fault_proxy.hpp"
#include "util/base64.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const char kSuiteLabel[] = "fault-suite";

// A proxy in front of the test cluster's apiserver, presenting the apiserver's own certificate.
FaultProxy::Options ProxyOptions() {
  const std::string pki = ClusterDir() + "/pki/";
  Json cluster = Json::parse(ReadFile(ClusterDir() + "/cluster.json"));
  FaultProxy::Options o;
  o.upstream_port = cluster.at("ports").at("apiserver").get<int>();
  o.ca_file = pki + "ca.crt";
  o.cert_file = pki + "apiserver.crt";
  o.key_file = pki + "apiserver.key";
  return o;
}

// The admin configuration, pointed at the proxy (same CA, same token).
ClientConfig ThroughProxy(const FaultProxy& proxy) {
  ClientConfig c = ConfigFor();
  c.server = proxy.url();
  return c;
}

bool IsWatch(const FaultProxy::Request& r) {
  return r.target.find("watch=true") != std::string::npos;
}
bool IsConfigMapList(const FaultProxy::Request& r) {
  return r.method == "GET" && r.target.find("/configmaps") != std::string::npos && !IsWatch(r);
}
int Count(const std::vector<FaultProxy::Request>& requests,
          const std::function<bool(const FaultProxy::Request&)>& match) {
  return static_cast<int>(std::count_if(requests.begin(), requests.end(), match));
}

ListOptions Selector(const std::string& scenario) {
  ListOptions o;
  o.label_selector = std::string(kSuiteLabel) + "=" + scenario;
  return o;
}

std::string Key(const std::string& name, const std::string& rv) { return name + "@" + rv; }

// Everything an Informer delivers, read on a thread of its own until Stop().
class Recorder {
 public:
  explicit Recorder(Informer informer) : informer_(std::move(informer)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Recorder() { Stop(); }
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  void Stop() {
    stop_ = true;
    informer_.Cancel();
    if (thread_.joinable()) thread_.join();
  }

  /// name@resourceVersion -> how many times it was delivered.
  std::map<std::string, int> deliveries() const {
    std::lock_guard lock(mu_);
    return deliveries_;
  }
  /// name -> resourceVersion of the objects that exist as far as the events tell.
  std::map<std::string, std::string> current() const {
    std::lock_guard lock(mu_);
    return current_;
  }
  /// The failure that ended Next() (nullptr while it runs).
  std::exception_ptr error() const {
    std::lock_guard lock(mu_);
    return error_;
  }
  int relists() const { return informer_.relist_count(); }
  std::string resource_version() const { return informer_.resource_version(); }

  /// Waits (bounded) until `condition` holds on the recorded state.
  bool WaitFor(const std::function<bool(const Recorder&)>& condition,
               std::chrono::milliseconds limit) const {
    return TestNamespace::WaitFor([&] { return condition(*this); }, limit);
  }

 private:
  void Run() {
    while (!stop_) {
      try {
        auto ev = informer_.Next(500ms);
        if (!ev) continue;
        const Json& m = ev->object.at("metadata");
        std::string name = m.at("name");
        std::string rv = m.at("resourceVersion");
        std::lock_guard lock(mu_);
        ++deliveries_[Key(name, rv)];
        if (ev->type == WatchEventType::kDeleted) {
          current_.erase(name);
        } else {
          current_[name] = rv;
        }
      } catch (...) {
        std::lock_guard lock(mu_);
        error_ = std::current_exception();
        return;
      }
    }
  }

  Informer informer_;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::map<std::string, int> deliveries_;
  std::map<std::string, std::string> current_;
  std::exception_ptr error_;
  std::thread thread_;
};

// The writes a scenario makes (directly to the apiserver unless said otherwise), with the
// resourceVersion the server answered each one with.
class Writes {
 public:
  Writes(Client client, std::string ns, std::string scenario)
      : client_(std::move(client)), ns_(std::move(ns)), scenario_(std::move(scenario)) {}

  Json Object(const std::string& name, std::size_t data_bytes = 16) const {
    return ConfigMap(name, {{"payload", std::string(data_bytes, 'x')}}, {{kSuiteLabel, scenario_}});
  }
  void Create(const std::string& name, std::size_t data_bytes = 16) {
    Record(client_.Create(kConfigMaps, ns_, Object(name, data_bytes)));
  }
  void Update(const std::string& name, const std::string& value) {
    Record(
        client_.Patch(kConfigMaps, ns_, name, PatchType::kMerge, {{"data", {{"update", value}}}}));
  }
  void Remove(const std::string& name) {
    // The DELETED event carries the version the deletion wrote, which the DELETE answer (the
    // object as it was) does not show: it is found in the events, so only the count is kept.
    client_.Delete(kConfigMaps, ns_, name);
    std::lock_guard lock(mu_);
    ++deletes_;
  }
  void Record(const Json& object) {
    std::lock_guard lock(mu_);
    written_.insert(Key(object["metadata"]["name"], object["metadata"]["resourceVersion"]));
  }
  std::set<std::string> written() const {
    std::lock_guard lock(mu_);
    return written_;
  }
  int deletes() const {
    std::lock_guard lock(mu_);
    return deletes_;
  }
  Client& client() { return client_; }

 private:
  Client client_;
  std::string ns_;
  std::string scenario_;
  mutable std::mutex mu_;
  std::set<std::string> written_;
  int deletes_ = 0;
};

// name -> resourceVersion of what the server holds now.
std::map<std::string, std::string> Listed(Client& client, const std::string& ns,
                                          const std::string& scenario) {
  std::map<std::string, std::string> out;
  const Json list = client.ListAll(kConfigMaps, ns, Selector(scenario));
  for (const auto& item : list.at("items")) {
    out[item["metadata"]["name"]] = item["metadata"]["resourceVersion"];
  }
  return out;
}

// The checks every scenario shares: nothing delivered twice, the Informer's view equals a LIST
// (waited for, bounded: events may still be on their way), no failure ended the Informer.
void CheckNoDuplicateAndMatchesList(const Recorder& rec, Client& client, const std::string& ns,
                                    const std::string& scenario) {
  auto listed = Listed(client, ns, scenario);
  bool same = rec.WaitFor([&](const Recorder& r) { return r.current() == listed; }, 60s);
  if (!same) {
    // Name what differs, so a failure says which event was lost.
    auto seen = rec.current();
    for (const auto& [name, rv] : listed) {
      CHECK_MESSAGE(seen.count(name) == 1, "never delivered: " << Key(name, rv));
      if (seen.count(name)) CHECK_MESSAGE(seen[name] == rv, "stale: " << name);
    }
    for (const auto& [name, rv] : seen) {
      CHECK_MESSAGE(listed.count(name) == 1, "delivered but not on the server: " << name);
    }
  }
  CHECK_MESSAGE(same, "the informer's view never matched the final LIST");
  for (const auto& [key, count] : rec.deliveries()) {
    CHECK_MESSAGE(count == 1, "delivered " << count << " times: " << key);
  }
  if (auto error = rec.error()) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      FAIL("the informer stopped with: " << e.what());
    }
  }
}

// Without a relist, the versions delivered (deletions aside) are exactly the versions written.
void CheckDeliveredExactlyWritten(const Recorder& rec, const Writes& writes) {
  std::set<std::string> delivered;
  for (const auto& [key, count] : rec.deliveries()) delivered.insert(key);
  const auto written = writes.written();
  for (const auto& key : written) CHECK_MESSAGE(delivered.count(key) == 1, "lost: " << key);
  // The only versions not written through Writes are the deletions' own.
  CHECK(delivered.size() == written.size() + static_cast<std::size_t>(writes.deletes()));
}

std::string Name(const std::string& prefix, int i) { return prefix + "-" + std::to_string(i); }

}  // namespace

TEST_SUITE("faults") {
  TEST_CASE(
      "connection reset in the middle of a watch, inside an event and then of every connection") {
    Client admin = AdminClient();
    TestNamespace ns(admin, "fault");
    FaultProxy proxy(ProxyOptions());
    // The first watch response is cut after 1500 bytes of its body: inside its third or fourth
    // event (a ConfigMap event is some 450 bytes), so the client holds half an event.
    proxy.CutNextResponse(IsWatch, 1500);
    Recorder rec(Informer(Client(ThroughProxy(proxy)), kConfigMaps, ns.name(), Selector("watch")));
    REQUIRE_MESSAGE(
        TestNamespace::WaitFor([&] { return Count(proxy.forwarded(), IsWatch) >= 1; }, 20s),
        "the informer never opened its watch");

    Writes writes(admin, ns.name(), "watch");
    for (int i = 0; i < 8; ++i) writes.Create(Name("w", i));
    REQUIRE_MESSAGE(TestNamespace::WaitFor([&] { return proxy.stats().cut == 1; }, 20s),
                    "the watch response was never cut");
    // The informer resumes with a new watch; then every live connection (that watch) is reset.
    REQUIRE_MESSAGE(
        TestNamespace::WaitFor([&] { return Count(proxy.forwarded(), IsWatch) >= 2; }, 20s),
        "the informer did not reopen its watch after the cut");
    for (int i = 8; i < 12; ++i) writes.Create(Name("w", i));
    REQUIRE(rec.WaitFor([](const Recorder& r) { return r.current().size() == 12; }, 20s));
    CHECK(proxy.ResetAll() == 1);
    for (int i = 12; i < 16; ++i) writes.Create(Name("w", i));
    for (int i = 0; i < 4; ++i) writes.Update(Name("w", i), "after-reset");
    for (int i = 4; i < 6; ++i) writes.Remove(Name("w", i));

    CheckNoDuplicateAndMatchesList(rec, admin, ns.name(), "watch");
    CHECK(rec.relists() == 0);
    CheckDeliveredExactlyWritten(rec, writes);
    const auto requests = proxy.forwarded();
    CHECK(Count(requests, IsConfigMapList) == 1);  // resumed twice, listed once
    CHECK(Count(requests, IsWatch) >= 3);
    for (const auto& r : requests) {
      if (IsWatch(r)) {
        CHECK_MESSAGE(r.target.find("resourceVersion=") != std::string::npos,
                      "a watch without a version: " << r.target);
      }
    }
    CHECK(proxy.stats().reset == 1);
  }

  TEST_CASE("connection reset in the middle of a list body, for a list and an informer's list") {
    Client admin = AdminClient();
    TestNamespace ns(admin, "fault");
    Writes writes(admin, ns.name(), "list");
    // 40 objects of some 700 bytes: a list body of ~30 kB, cut after 4000 bytes.
    for (int i = 0; i < 40; ++i) writes.Create(Name("l", i), 400);
    FaultProxy proxy(ProxyOptions());
    Client via(ThroughProxy(proxy));

    proxy.CutNextResponse(IsConfigMapList, 4000);
    Json list = via.ListAll(kConfigMaps, ns.name(), Selector("list"));
    CHECK(list["items"].size() == 40);
    CHECK(proxy.stats().cut == 1);
    CHECK(Count(proxy.forwarded(), IsConfigMapList) == 2);  // the cut list and its retry

    proxy.CutNextResponse(IsConfigMapList, 4000);
    Recorder rec(Informer(via, kConfigMaps, ns.name(), Selector("list")));
    REQUIRE(rec.WaitFor([](const Recorder& r) { return r.current().size() == 40; }, 30s));
    CHECK(proxy.stats().cut == 2);
    CHECK(Count(proxy.forwarded(), IsConfigMapList) == 4);
    // The watch that follows the retried list works: changes arrive once each.
    REQUIRE(TestNamespace::WaitFor([&] { return Count(proxy.forwarded(), IsWatch) >= 1; }, 20s));
    for (int i = 0; i < 3; ++i) writes.Update(Name("l", i), "after-cut");
    CheckNoDuplicateAndMatchesList(rec, admin, ns.name(), "list");
    CHECK(rec.relists() == 0);
    CheckDeliveredExactlyWritten(rec, writes);
  }

  TEST_CASE(
      "a black-holed connection: the silent watch is ended and resumed, a call ends at its "
      "deadline") {
    Client admin = AdminClient();
    TestNamespace ns(admin, "fault");
    FaultProxy proxy(ProxyOptions());
    ClientConfig cfg = ThroughProxy(proxy);
    cfg.watch_idle_timeout = 2s;
    cfg.request_timeout = 3s;
    Recorder rec(Informer(Client(cfg), kConfigMaps, ns.name(), Selector("blackhole")));
    REQUIRE(TestNamespace::WaitFor([&] { return Count(proxy.forwarded(), IsWatch) >= 1; }, 20s));
    Writes writes(admin, ns.name(), "blackhole");
    for (int i = 0; i < 5; ++i) writes.Create(Name("b", i));
    REQUIRE(rec.WaitFor([](const Recorder& r) { return r.current().size() == 5; }, 20s));

    proxy.SetBlackHole(true);
    for (int i = 5; i < 10; ++i) writes.Create(Name("b", i));
    // A call into the black hole ends with a typed timeout (request_timeout), not a hang.
    try {
      Client(cfg).Get(kConfigMaps, ns.name(), Name("b", 0));
      FAIL("a call through the black hole returned");
    } catch (const TransportError& e) {
      CHECK(e.kind() == ErrorKind::kTimeout);
    }
    // The informer's watch went silent: watch_idle_timeout ended it and the informer tried to
    // open a new one (swallowed as well). Nothing was delivered meanwhile.
    CHECK_MESSAGE(TestNamespace::WaitFor([&] { return proxy.stats().black_holed >= 2; }, 20s),
                  "the informer never gave up its silent watch");
    CHECK(rec.current().size() == 5);
    proxy.SetBlackHole(false);

    CheckNoDuplicateAndMatchesList(rec, admin, ns.name(), "blackhole");
    CHECK(rec.current().size() == 10);
    CHECK(rec.relists() == 0);
    CheckDeliveredExactlyWritten(rec, writes);
    CHECK(Count(proxy.forwarded(), IsConfigMapList) == 1);
  }

  TEST_CASE("a 429 storm with Retry-After: every write succeeds and reaches the server once") {
    Client admin = AdminClient();
    TestNamespace ns(admin, "fault");
    FaultProxy proxy(ProxyOptions());
    Client via(ThroughProxy(proxy));
    Recorder rec(Informer(via, kConfigMaps, ns.name(), Selector("storm")));
    REQUIRE(TestNamespace::WaitFor([&] { return Count(proxy.forwarded(), IsWatch) >= 1; }, 20s));

    constexpr int kStorm = 12;
    constexpr int kThreads = 4;
    constexpr int kPerThread = 4;
    proxy.Answer429(kStorm, 1);
    Writes writes(via, ns.name(), "storm");  // the writes go through the proxy
    std::mutex failures_mu;
    std::vector<std::string> failures;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          try {
            writes.Create(Name("s" + std::to_string(t), i));
          } catch (const std::exception& e) {
            std::lock_guard lock(failures_mu);
            failures.push_back(e.what());
          }
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& f : failures) CHECK_MESSAGE(false, "a write failed: " << f);
    const auto stats = proxy.stats();
    CHECK(stats.answered_429 == kStorm);
    // Each create reached the apiserver exactly once: retried only after the proxy's 429s.
    CHECK(stats.forwarded_by_method.count("POST") == 1);
    CHECK(stats.forwarded_by_method.at("POST") == kThreads * kPerThread);
    CHECK(writes.written().size() == static_cast<std::size_t>(kThreads * kPerThread));
    CHECK(Listed(admin, ns.name(), "storm").size() ==
          static_cast<std::size_t>(kThreads * kPerThread));

    CheckNoDuplicateAndMatchesList(rec, admin, ns.name(), "storm");
    CHECK(rec.relists() == 0);
    CheckDeliveredExactlyWritten(rec, writes);
  }

  TEST_CASE(
      "a revoked token during a watch: re-read from the token file after the 401, then a typed "
      "Unauthorized") {
    Client admin = AdminClient();
    TestNamespace ns(admin, "fault");
    // A service account that may read ConfigMaps here, with two tokens (its own token Secret and
    // a second one): deleting a token's Secret revokes the token on the apiserver.
    const std::string sa = "fault-watcher";
    const ResourceType service_accounts{"", "v1", "ServiceAccount", "serviceaccounts", true};
    const ResourceType secrets{"", "v1", "Secret", "secrets", true};
    const ResourceType roles{"rbac.authorization.k8s.io", "v1", "Role", "roles", true};
    const ResourceType bindings{"rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings",
                                true};
    admin.Create(service_accounts, ns.name(), {{"metadata", {{"name", sa}}}});
    admin.Create(roles, ns.name(),
                 {{"metadata", {{"name", sa}}},
                  {"rules", Json::array({{{"apiGroups", {""}},
                                          {"resources", {"configmaps"}},
                                          {"verbs", {"get", "list", "watch"}}}})}});
    admin.Create(
        bindings, ns.name(),
        {{"metadata", {{"name", sa}}},
         {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", sa}}},
         {"subjects",
          Json::array({{{"kind", "ServiceAccount"}, {"name", sa}, {"namespace", ns.name()}}})}});
    admin.Create(secrets, ns.name(),
                 {{"metadata",
                   {{"name", sa + "-second"},
                    {"annotations", {{"kubernetes.io/service-account.name", sa}}}}},
                  {"type", "kubernetes.io/service-account-token"}});
    // The token controller fills both token Secrets.
    std::string first_secret, first, second;
    auto token_of = [&](const std::string& secret) {
      Json s = admin.Get(secrets, ns.name(), secret);
      if (!s.contains("data") || !s["data"].contains("token")) return std::string();
      return internal::Base64Decode(s["data"]["token"].get<std::string>()).value_or("");
    };
    REQUIRE_MESSAGE(TestNamespace::WaitFor(
                        [&] {
                          Json account = admin.Get(service_accounts, ns.name(), sa);
                          for (const auto& ref : account.value("secrets", Json::array())) {
                            std::string n = ref.value("name", "");
                            if (n != sa + "-second" && !token_of(n).empty()) {
                              first_secret = n;
                              first = token_of(n);
                            }
                          }
                          second = token_of(sa + "-second");
                          return !first.empty() && !second.empty();
                        },
                        30s),
                    "the token controller did not issue the service account's tokens");
    auto revoked = [&](const std::string& token) {
      ClientConfig c = ConfigFor();
      c.token = token;
      c.retry.max_attempts = 1;
      try {
        Client(c).List(kConfigMaps, ns.name());
        return false;
      } catch (const Unauthorized&) {
        return true;
      }
    };
    REQUIRE_FALSE(revoked(first));

    const std::string token_path =
        (std::filesystem::temp_directory_path() / ("tfk8s-fault-token-" + ns.name())).string();
    auto write_token = [&](const std::string& token) {
      const std::string tmp = token_path + ".tmp";
      {
        std::ofstream out(tmp, std::ios::trunc);
        out << token << "\n";
      }
      ::chmod(tmp.c_str(), 0600);
      std::filesystem::rename(tmp, token_path);  // atomically, as the kubelet does
    };
    write_token(first);
    struct Cleanup {
      std::string path;
      ~Cleanup() { std::remove(path.c_str()); }
    } cleanup{token_path};

    ClientConfig cfg = ConfigFor();
    cfg.token.clear();
    cfg.token_file = token_path;
    cfg.token_file_refresh = std::chrono::hours(1);  // only a 401 makes it read the file again
    Informer informer(Client(cfg), kConfigMaps, ns.name(), Selector("token"));
    informer.set_watch_timeout(
        1s);  // each watch ends after 1-2 s and is opened (authenticated) again
    Recorder rec(std::move(informer));
    Writes writes(admin, ns.name(), "token");
    for (int i = 0; i < 4; ++i) writes.Create(Name("t", i));
    REQUIRE(rec.WaitFor([](const Recorder& r) { return r.current().size() == 4; }, 20s));

    // Rotation: the file gets the second token, the first is revoked (the apiserver caches a
    // successful token review for up to 10 s, so revocation is waited for).
    write_token(second);
    admin.Delete(secrets, ns.name(), first_secret);
    REQUIRE_MESSAGE(TestNamespace::WaitFor([&] { return revoked(first); }, 30s),
                    "deleting the token's Secret did not revoke it");
    for (int i = 4; i < 8; ++i) writes.Create(Name("t", i));
    // The informer's next watch got a 401 with the first token, re-read the file (its refresh
    // period is an hour) and went on with the second: nothing lost, nothing twice, no relist.
    CheckNoDuplicateAndMatchesList(rec, admin, ns.name(), "token");
    CHECK(rec.relists() == 0);
    CheckDeliveredExactlyWritten(rec, writes);

    // Revocation without a new token: the informer stops with a typed Unauthorized.
    admin.Delete(secrets, ns.name(), sa + "-second");
    REQUIRE_MESSAGE(TestNamespace::WaitFor([&] { return revoked(second); }, 30s),
                    "deleting the second token's Secret did not revoke it");
    REQUIRE_MESSAGE(rec.WaitFor([](const Recorder& r) { return r.error() != nullptr; }, 20s),
                    "the informer went on without a valid token");
    try {
      std::rethrow_exception(rec.error());
    } catch (const Unauthorized& e) {
      const std::string message = e.what();
      CHECK(message.find(first) == std::string::npos);
      CHECK(message.find(second) == std::string::npos);
    } catch (const std::exception& e) {
      FAIL("expected Unauthorized, got: " << e.what());
    }
  }

  TEST_CASE("API server restart in the middle of a watch and of a multi-object apply") {
    Client admin = AdminClient();
    TestNamespace ns(admin, "fault");
    Recorder rec(Informer(admin, kConfigMaps, ns.name(), Selector("restart")));  // HTTP/2, direct
    REQUIRE(rec.WaitFor([](const Recorder& r) { return !r.resource_version().empty(); }, 20s));

    // A slow multi-object apply (10 objects a second): the restart lands in its middle.
    ClientConfig slow = ConfigFor();
    slow.rate_limit.qps = 10;
    slow.rate_limit.burst = 1;
    Client writer(slow);
    Writes objects(writer, ns.name(), "restart");
    constexpr int kObjects = 60;
    std::vector<Json> batch;
    for (int i = 0; i < kObjects; ++i) {
      Json o = objects.Object(Name("r", i));
      o["metadata"]["namespace"] = ns.name();
      batch.push_back(o);
    }
    std::vector<ApplyResult> first;
    std::thread apply([&] { first = writer.ApplyAll(batch, {}, 4); });
    bool started = rec.WaitFor([](const Recorder& r) { return r.current().size() >= 10; }, 30s);

    const std::string dir = ClusterDir();
    const std::string log = dir + "/logs/fault-restart-apiserver.log";
    const std::string command = "TFK8S_LOCAL_HOME='" + dir.substr(0, dir.rfind('/')) + "' '" +
                                TFK8S_LOCAL_TOOL + "' restart-apiserver --instance '" +
                                dir.substr(dir.rfind('/') + 1) + "' >'" + log + "' 2>&1";
    const int restarted = std::system(command.c_str());
    apply.join();
    REQUIRE_MESSAGE(started, "the apply never got going");
    REQUIRE_MESSAGE(restarted == 0, "tfk8s-local restart-apiserver failed, see " << log);

    // The apply reports each object: applied, or a typed tfk8s error (a write is never resent
    // by the client, so the caller re-applies, which server-side apply makes safe).
    REQUIRE(first.size() == static_cast<std::size_t>(kObjects));
    std::vector<Json> again;
    std::map<std::string, std::string> told;  // name -> the version the client was told
    for (std::size_t i = 0; i < first.size(); ++i) {
      if (first[i].ok()) {
        told[batch[i]["metadata"]["name"]] = first[i].object["metadata"]["resourceVersion"];
        continue;
      }
      again.push_back(batch[i]);
      try {
        std::rethrow_exception(first[i].error);
      } catch (const Error&) {
        // typed: fine
      } catch (const std::exception& e) {
        FAIL("an untyped apply failure: " << e.what());
      }
    }
    CHECK_MESSAGE(!again.empty(), "the restart failed no apply: it did not land in the middle");
    const std::size_t applied_before = first.size() - again.size();
    MESSAGE(applied_before << " applied before the restart, " << again.size()
                           << " failed and re-applied");
    for (const auto& r : admin.ApplyAll(again)) {
      REQUIRE_MESSAGE(r.ok(), r.error_message());
      told[r.object["metadata"]["name"]] = r.object["metadata"]["resourceVersion"];
    }
    // No write behind the client's back: every object holds the version the client was told.
    auto listed = Listed(admin, ns.name(), "restart");
    CHECK(listed.size() == static_cast<std::size_t>(kObjects));
    CHECK(listed == told);

    // The informer came through the restart (resumed or relisted) and keeps watching.
    for (int i = 0; i < 5; ++i) objects.Update(Name("r", i), "after-restart");
    CheckNoDuplicateAndMatchesList(rec, admin, ns.name(), "restart");
    const auto deliveries = rec.deliveries();
    for (const auto& key : objects.written()) {
      CHECK_MESSAGE(deliveries.count(key) == 1, "lost after the restart: " << key);
    }
    MESSAGE("relists after the restart: " << rec.relists());
  }
}
