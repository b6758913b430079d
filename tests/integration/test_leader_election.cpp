// Leader election against the real apiserver: the Lease it writes is accepted (MicroTime
// format, coordination.k8s.io/v1), a second candidate stands back, and after a release the
// next one takes over; two candidates racing for an expired Lease leave exactly one holder.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cluster.hpp"
#include "tfk8s/leader_election.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;

namespace {

const ResourceType kLeases{"coordination.k8s.io", "v1", "Lease", "leases", true};

LeaderElectionConfig Config(const std::string& ns, const std::string& identity) {
  LeaderElectionConfig c;
  c.namespace_name = ns;
  c.lease_name = "tfk8s-controller";
  c.identity = identity;
  c.lease_duration = std::chrono::milliseconds(3000);
  c.renew_deadline = std::chrono::milliseconds(2000);
  c.retry_period = std::chrono::milliseconds(200);
  return c;
}

}  // namespace

TEST_SUITE("leader election") {
  TEST_CASE("the apiserver stores the elector's Lease, and a release hands it over") {
    Client c = AdminClient();
    TestNamespace ns(c, "lease");
    LeaderElector a(c, Config(ns.name(), "a")), b(c, Config(ns.name(), "b"));
    REQUIRE(a.TryAcquireOrRenew());
    Json lease = c.Get(kLeases, ns.name(), "tfk8s-controller");
    LeaderElectionRecord stored = LeaderElectionRecordFromLease(lease);
    CHECK(stored.holder == "a");
    CHECK(stored.lease_duration_seconds == 3);
    // The server parsed and wrote back the MicroTime as sent.
    CHECK(stored.renew_time == a.Observed().renew_time);
    CHECK_FALSE(b.TryAcquireOrRenew());
    CHECK(b.Leader() == "a");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    REQUIRE(a.TryAcquireOrRenew());  // a renewal is an update conditional on resourceVersion
    CHECK(a.Release());
    CHECK(b.TryAcquireOrRenew());
    stored = LeaderElectionRecordFromLease(c.Get(kLeases, ns.name(), "tfk8s-controller"));
    CHECK(stored.holder == "b");
    CHECK(stored.lease_transitions == 1);
  }

  TEST_CASE("candidates racing for an expired Lease leave exactly one holder") {
    Client c = AdminClient();
    TestNamespace ns(c, "lease-race");
    LeaderElector old(c, Config(ns.name(), "old"));
    REQUIRE(old.TryAcquireOrRenew());
    std::vector<std::unique_ptr<LeaderElector>> racers;
    for (int i = 0; i < 4; ++i) {
      racers.push_back(
          std::make_unique<LeaderElector>(c, Config(ns.name(), "racer-" + std::to_string(i))));
      CHECK_FALSE(racers.back()->TryAcquireOrRenew());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(3100));  // "old" went silent
    std::atomic<int> won{0};
    std::vector<std::thread> threads;
    threads.reserve(racers.size());
    for (auto& r : racers) {
      threads.emplace_back([&won, &r] { won += r->TryAcquireOrRenew() ? 1 : 0; });
    }
    for (auto& t : threads) t.join();
    CHECK(won.load() == 1);
    LeaderElectionRecord stored =
        LeaderElectionRecordFromLease(c.Get(kLeases, ns.name(), "tfk8s-controller"));
    int holders = 0;
    for (auto& r : racers) holders += r->IsLeader() ? 1 : 0;
    CHECK(holders == 1);
    CHECK(stored.holder.rfind("racer-", 0) == 0);
  }
}
